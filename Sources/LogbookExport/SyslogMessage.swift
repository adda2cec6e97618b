import Foundation
import Logbook

/// Log entries as RFC 5424 syslog messages, framed for TCP by octet counting (RFC 6587) or
/// unframed for RELP.
///
/// ```
/// 219 <14>1 2026-11-24T04:31:21.123456Z host app 4242 net [logbook@32473 thread="7" ...][meta@32473 user="42"] BOMrequest 7 took 1.5 ms
/// ```
public struct SyslogFormat: Sendable {
    /// The facility of every message (RFC 5424 table 1): 1 (user-level) by default.
    public var facility: UInt8
    /// HOSTNAME: this machine's name by default.
    public var hostname: String
    /// APP-NAME: the executable's name by default.
    public var appName: String
    /// The private enterprise number of the structured data IDs (`logbook@PEN`, `meta@PEN`):
    /// 32473, the one RFC 5612 reserves for documentation, unless you have your own.
    public var enterpriseNumber: UInt32
    /// The largest message, framing excluded (rsyslog's default `maxMessageSize` is 8096).
    public var maximumBytes: Int

    public init(facility: UInt8 = 1, hostname: String? = nil, appName: String? = nil, enterpriseNumber: UInt32 = 32473,
                maximumBytes: Int = 8096) {
        self.facility = min(facility, 23)
        self.hostname = hostname ?? ProcessInfo.processInfo.hostName
        self.appName = appName ?? ProcessInfo.processInfo.processName
        self.enterpriseNumber = enterpriseNumber
        self.maximumBytes = max(maximumBytes, 480)  // RFC 5424 6.1: receivers take at least 480 octets
    }

    /// RFC 5424 severity of a Logbook level: trace and debug are Debug (7), info Informational (6),
    /// notice Notice (5), warning Warning (4), error Error (3), critical Critical (2).
    public static func severity(of level: LogLevel?) -> UInt8 {
        switch level {
        case .trace, .debug: 7
        case .info, nil: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// One entry as a syslog message (no framing), and whether it had to be cut to `maximumBytes`
    /// (then its MSG ends with the truncation marker).
    public func message(for entry: LogEntry) -> (bytes: [UInt8], truncated: Bool) {
        var out = LineRenderer(capacity: 512)
        let truncated = appendMessage(for: entry, to: &out)
        return (out.bytes, truncated)
    }

    /// The message framed by octet counting: its length in decimal, a space, the message.
    public func frame(for entry: LogEntry) -> (bytes: [UInt8], truncated: Bool) {
        var out = LineRenderer(capacity: 512)
        let truncated = appendFrame(for: entry, to: &out)
        return (out.bytes, truncated)
    }

    /// Appends one entry's message (no framing) to `bytes`, the buffer of a whole batch; returns
    /// whether it had to be cut to `maximumBytes`. The same bytes as ``message(for:)``.
    public func appendMessage(for entry: LogEntry, to bytes: inout [UInt8]) -> Bool {
        var out = LineRenderer(capacity: 0)
        swap(&out.bytes, &bytes)
        defer { swap(&out.bytes, &bytes) }
        return appendMessage(for: entry, to: &out)
    }

    /// Appends one entry's octet-counted frame to `bytes`; returns whether it had to be cut. The
    /// same bytes as ``frame(for:)``.
    public func appendFrame(for entry: LogEntry, to bytes: inout [UInt8]) -> Bool {
        var out = LineRenderer(capacity: 0)
        swap(&out.bytes, &bytes)
        defer { swap(&out.bytes, &bytes) }
        return appendFrame(for: entry, to: &out)
    }

    static let truncationMarker = Array("…[truncated]".utf8)
    static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// The frame: the message, then its length and a space put in front of it (a move of the
    /// message's bytes, cheaper than a second buffer).
    func appendFrame(for entry: LogEntry, to out: inout LineRenderer) -> Bool {
        let start = out.bytes.count
        let truncated = appendMessage(for: entry, to: &out)
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // the length and a space, written backwards
        withUnsafeMutableBytes(of: &digits) { scratch in
            var length = out.bytes.count - start
            var position = 23
            scratch[position] = 0x20
            repeat {
                position -= 1
                scratch[position] = UInt8(truncatingIfNeeded: 48 + length % 10)
                length /= 10
            } while length != 0
            out.bytes.insert(contentsOf: scratch[position...], at: start)
        }
        return truncated
    }

    /// The message, written straight into `out.bytes` (no String per record): header, structured
    /// data and MSG; then, only when that is longer than `maximumBytes`, cut again.
    func appendMessage(for entry: LogEntry, to out: inout LineRenderer) -> Bool {
        let start = out.bytes.count
        out.bytes.append(UInt8(ascii: "<"))
        out.appendUnsigned(UInt64(facility) * 8 + UInt64(Self.severity(of: entry.level)))
        out.appendLiteral(">1 ")
        Self.appendTimestamp(entry.wallNanoseconds, to: &out.bytes)
        out.bytes.append(0x20)
        Self.appendHeaderField(hostname, limit: 255, to: &out.bytes)
        out.bytes.append(0x20)
        Self.appendHeaderField(appName, limit: 48, to: &out.bytes)
        out.bytes.append(0x20)
        out.appendUnsigned(UInt64(entry.processID))  // PROCID: at most 10 digits, PRINTUSASCII
        out.bytes.append(0x20)
        Self.appendHeaderField(entry.logger ?? "", limit: 32, to: &out.bytes)
        out.bytes.append(0x20)
        let headerEnd = out.bytes.count
        appendStructuredData(of: entry, budget: .max, to: &out)
        let dataEnd = out.bytes.count
        out.bytes.append(0x20)
        out.appendPlainMessage(entry)
        let messageStart = dataEnd + 1
        if out.bytes.count == messageStart {
            out.bytes.removeLast()  // an empty MSG: no SP either
            if dataEnd - start <= maximumBytes { return false }
        } else {
            let utf8 = out.bytes[messageStart...].contains { $0 >= 0x80 }
            if out.bytes.count - start + (utf8 ? Self.bom.count : 0) <= maximumBytes {
                if utf8 { out.bytes.insert(contentsOf: Self.bom, at: messageStart) }
                return false
            }
        }
        // Too long. The MSG is cut first; the structured data only when it alone leaves no room
        // for a cut MSG, and then by whole parameters (the last one cut inside its value), so that
        // every element stays closed (an outside test saw rsyslog store SD cut inside a value).
        // A cut MSG ends with the marker, which is UTF-8: it starts with the BOM.
        let message = messageStart <= out.bytes.count ? Array(out.bytes[messageStart...]) : []
        let room = 1 + Self.bom.count + Self.truncationMarker.count
        let budget = maximumBytes - (headerEnd - start) - room
        if dataEnd - headerEnd <= budget {
            out.bytes.removeSubrange(dataEnd...)
        } else {
            out.bytes.removeSubrange(headerEnd...)
            appendStructuredData(of: entry, budget: budget, to: &out)
        }
        var end = min(message.count, max(0, maximumBytes - (out.bytes.count - start) - room))
        while end > 0 && end < message.count && message[end] & 0xC0 == 0x80 { end -= 1 }  // not inside a character
        out.bytes.append(0x20)
        out.bytes += Self.bom
        out.bytes += message[..<end]
        out.bytes += Self.truncationMarker
        if out.bytes.count - start > maximumBytes {
            // The last resort, for a header that alone is longer than the limit: cut at a UTF-8
            // boundary, then the marker.
            var end = start + max(0, maximumBytes - Self.truncationMarker.count)
            while end > start && out.bytes[end] & 0xC0 == 0x80 { end -= 1 }  // not inside a character
            out.bytes.removeSubrange(end...)
            out.bytes += Self.truncationMarker
        }
        return true
    }

    /// FULL-DATE "T" FULL-TIME in UTC with microseconds (TIME-SECFRAC takes at most six digits).
    static func timestamp(_ nanoseconds: Int64) -> String {
        var bytes: [UInt8] = []
        appendTimestamp(nanoseconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `YYYY-MM-DDThh:mm:ss.uuuuuuZ`: 27 bytes, by Logbook's one RFC 3339 formatter.
    static func appendTimestamp(_ nanoseconds: Int64, to bytes: inout [UInt8]) {
        var text: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &text) { raw in
            let buffer = raw.bindMemory(to: UInt8.self)
            let count = writeRFC3339(nanoseconds: nanoseconds, fractionDigits: 6, to: buffer)
            bytes.append(contentsOf: buffer[0..<count])
        }
    }

    /// A header field: PRINTUSASCII only (others become '?'), at most `limit` octets, NILVALUE when empty.
    static func appendHeaderField(_ text: String, limit: Int, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { utf8 in
            let count = min(utf8.count, limit)
            if count == 0 { return out.append(UInt8(ascii: "-")) }
            if utf8.prefix(count).allSatisfy({ $0 &- 33 < 94 }) { return out.append(contentsOf: utf8.prefix(count)) }
            for byte in utf8.prefix(count) { out.append(byte &- 33 < 94 ? byte : UInt8(ascii: "?")) }
        }
    }

    /// Whether a byte may stand in an SD-NAME (an SD-ID or PARAM-NAME): PRINTUSASCII except '=',
    /// SP, ']' and '"'.
    @inline(__always)
    static func isNameByte(_ byte: UInt8) -> Bool {
        byte &- 33 < 94 && byte != UInt8(ascii: "=") && byte != UInt8(ascii: "]") && byte != UInt8(ascii: "\"")
    }

    /// An SD-NAME: 1 to 32 name bytes (others become '_'): `prefix.key`, or `key` when there is
    /// no prefix (nested metadata keys are joined with '.').
    static func appendName(_ key: String, prefix: String = "", to out: inout [UInt8]) {
        var count = 0
        func put(_ text: String) {
            var text = text
            text.withUTF8 { utf8 in
                for byte in utf8 where count < 32 {
                    out.append(isNameByte(byte) ? byte : UInt8(ascii: "_"))
                    count += 1
                }
            }
        }
        if !prefix.isEmpty {
            put(prefix)
            put(".")
        }
        put(key)
        if count == 0 { out.append(UInt8(ascii: "_")) }
    }

    /// Whether a PARAM-VALUE byte needs a backslash before it: '"', '\' and ']'.
    @inline(__always)
    static func needsEscape(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "]")
    }

    /// A PARAM-VALUE: UTF-8 with '"', '\' and ']' escaped by a backslash.
    static func appendValue(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { utf8 in
            guard utf8.contains(where: needsEscape) else { return out.append(contentsOf: utf8) }
            for byte in utf8 {
                if needsEscape(byte) { out.append(UInt8(ascii: "\\")) }
                out.append(byte)
            }
        }
    }

    /// Escapes, in place, a value written unescaped from `start` to the end of `out`.
    static func escapeValue(from start: Int, in out: inout [UInt8]) {
        guard let first = out[start...].firstIndex(where: needsEscape) else { return }
        let rest = Array(out[first...])
        out.removeSubrange(first...)
        for byte in rest {
            if needsEscape(byte) { out.append(UInt8(ascii: "\\")) }
            out.append(byte)
        }
    }

    /// `[logbook@PEN thread=".." file=".." line=".." function=".." error.type=".." error.message=".."]`
    /// then `[meta@PEN key="value" ...]` for the metadata (nested keys joined with '.'), in at most
    /// `budget` bytes: parameters that do not fit are left out, the first of them cut inside its
    /// value (at a character, never inside an escape, ending with "…"); an element always closes.
    /// NILVALUE when not even the first element's name fits. Written into `out.bytes`, each
    /// parameter checked against the budget after it is written and taken back if it does not fit.
    private func appendStructuredData(of entry: LogEntry, budget: Int, to out: inout LineRenderer) {
        var data = StructuredDataWriter(start: out.bytes.count, budget: budget)
        if data.open("logbook@", enterpriseNumber, &out) {
            data.parameter("thread", &out) { $0.appendUnsigned(UInt64(entry.threadID)) }
            if let file = entry.file {
                data.parameter("file", &out) { Self.appendValue(file, to: &$0.bytes) }
                data.parameter("line", &out) { $0.appendUnsigned(UInt64(entry.line)) }
            }
            if let function = entry.function { data.parameter("function", &out) { Self.appendValue(function, to: &$0.bytes) } }
            if let error = entry.error {
                data.parameter("error.type", &out) { Self.appendValue(error.type, to: &$0.bytes) }
                data.parameter("error.message", &out) { Self.appendValue(error.description, to: &$0.bytes) }
            }
            data.close(&out)
        }
        if !entry.metadata.isEmpty && data.open("meta@", enterpriseNumber, &out) {
            func flatten(_ metadata: LogMetadata, prefix: String) {
                for pair in metadata.pairs {
                    if case .map(let nested) = pair.value {
                        flatten(nested, prefix: prefix.isEmpty ? pair.key : prefix + "." + pair.key)
                        continue
                    }
                    data.parameter(pair.key, prefix: prefix, &out) { out in
                        switch pair.value {
                        case .value(.string(let text, _)): Self.appendValue(text, to: &out.bytes)
                        case .value(.signed(let value, _)): out.appendInteger(value)
                        case .value(.unsigned(let value, _)): out.appendUnsigned(value)
                        default:
                            let valueStart = out.bytes.count
                            out.appendMetadataText(pair.value)
                            Self.escapeValue(from: valueStart, in: &out.bytes)
                        }
                    }
                }
            }
            flatten(entry.metadata, prefix: "")
            data.close(&out)
        }
        if out.bytes.count == data.start { out.bytes.append(UInt8(ascii: "-")) }
    }
}

/// Structured data written into a buffer within a budget of bytes: an element opens only if its
/// name and ']' fit; a parameter that does not fit is taken back and cut inside its value, and
/// after it nothing more is written.
private struct StructuredDataWriter {
    let start: Int
    let budget: Int
    /// A parameter or element did not fit: the rest is left out.
    private(set) var full = false

    init(start: Int, budget: Int) {
        self.start = start
        self.budget = budget
    }

    /// `[NAMEn`, if it and the element's ']' fit.
    mutating func open(_ name: StaticString, _ number: UInt32, _ out: inout LineRenderer) -> Bool {
        guard !full else { return false }
        let elementStart = out.bytes.count
        out.bytes.append(UInt8(ascii: "["))
        out.appendLiteral(name)
        out.appendUnsigned(UInt64(number))
        if out.bytes.count - start + 1 > budget {
            out.bytes.removeSubrange(elementStart...)
            full = true
            return false
        }
        return true
    }

    /// ` NAME="VALUE"`: `value` writes the value escaped.
    mutating func parameter(_ name: String, prefix: String = "", _ out: inout LineRenderer, value: (inout LineRenderer) -> Void) {
        guard !full else { return }
        let parameterStart = out.bytes.count
        out.bytes.append(0x20)
        SyslogFormat.appendName(name, prefix: prefix, to: &out.bytes)
        out.appendLiteral("=\"")
        let valueStart = out.bytes.count
        value(&out)
        let closing = 2  // '"' and the element's ']'
        if out.bytes.count - start + closing <= budget {
            out.bytes.append(UInt8(ascii: "\""))
            return
        }
        // The first parameter that does not fit: as much of its value as does, whole characters
        // and whole escapes, then "…".
        full = true
        let escaped = Array(out.bytes[valueStart...])
        out.bytes.removeSubrange(valueStart...)
        let ellipsis: StaticString = "…"
        var room = budget - (valueStart - start) - closing - ellipsis.utf8CodeUnitCount
        guard room > 0 else { return out.bytes.removeSubrange(parameterStart...) }
        var index = 0
        while index < escaped.count {
            let lead = escaped[index]
            let piece = lead == UInt8(ascii: "\\") ? 2 : lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4
            if piece > room || index + piece > escaped.count { break }
            out.bytes += escaped[index..<(index + piece)]
            room -= piece
            index += piece
        }
        out.appendLiteral(ellipsis)
        out.bytes.append(UInt8(ascii: "\""))
    }

    /// The element's ']' (its room was kept when it opened and by every parameter).
    func close(_ out: inout LineRenderer) {
        out.bytes.append(UInt8(ascii: "]"))
    }
}
