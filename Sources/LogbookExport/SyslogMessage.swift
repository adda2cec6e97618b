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
        var out: [UInt8] = []
        out.reserveCapacity(256)
        let prival = Int(facility) * 8 + Int(Self.severity(of: entry.level))
        out += Array("<\(prival)>1 ".utf8)
        out += Array(Self.timestamp(entry.wallNanoseconds).utf8)
        out.append(0x20)
        Self.appendHeaderField(hostname, limit: 255, to: &out)
        out.append(0x20)
        Self.appendHeaderField(appName, limit: 48, to: &out)
        out.append(0x20)
        Self.appendHeaderField(String(entry.processID), limit: 128, to: &out)
        out.append(0x20)
        Self.appendHeaderField(entry.logger ?? "", limit: 32, to: &out)
        out.append(0x20)
        let message = Array(entry.message.utf8)
        let structured = structuredData(of: entry, budget: .max).bytes
        let whole = message.isEmpty ? [] : [0x20] + (message.contains(where: { $0 >= 0x80 }) ? Self.bom : []) + message
        if out.count + structured.count + whole.count <= maximumBytes { return (out + structured + whole, false) }
        // Too long. The MSG is cut first; the structured data only when it alone leaves no room
        // for a cut MSG, and then by whole parameters (the last one cut inside its value), so that
        // every element stays closed (an outside test saw rsyslog store SD cut inside a value).
        // A cut MSG ends with the marker, which is UTF-8: it starts with the BOM.
        let room = 1 + Self.bom.count + Self.truncationMarker.count
        let budget = maximumBytes - out.count - room
        out += structured.count <= budget ? structured : structuredData(of: entry, budget: budget).bytes
        var end = min(message.count, max(0, maximumBytes - out.count - room))
        while end > 0 && end < message.count && message[end] & 0xC0 == 0x80 { end -= 1 }  // not inside a character
        out += [0x20] + Self.bom + message[..<end] + Self.truncationMarker
        return out.count <= maximumBytes ? (out, true) : fit(out, truncated: true)  // a header longer than the limit
    }

    /// The message framed by octet counting: its length in decimal, a space, the message.
    public func frame(for entry: LogEntry) -> (bytes: [UInt8], truncated: Bool) {
        let (bytes, truncated) = message(for: entry)
        return (Array("\(bytes.count) ".utf8) + bytes, truncated)
    }

    static let truncationMarker = Array("…[truncated]".utf8)
    static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// Cuts a message longer than `maximumBytes` at a UTF-8 boundary and ends it with the marker
    /// (the last resort, for a header that alone is longer than the limit).
    private func fit(_ bytes: [UInt8], truncated: Bool) -> (bytes: [UInt8], truncated: Bool) {
        guard bytes.count > maximumBytes else { return (bytes, truncated) }
        var end = max(0, maximumBytes - Self.truncationMarker.count)
        while end > 0 && bytes[end] & 0xC0 == 0x80 { end -= 1 }  // not inside a character
        return (Array(bytes[..<end]) + Self.truncationMarker, true)
    }

    /// FULL-DATE "T" FULL-TIME in UTC with microseconds (TIME-SECFRAC takes at most six digits).
    static func timestamp(_ nanoseconds: Int64) -> String {
        func floorDivide(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : (a - (b - 1)) / b }
        let seconds = floorDivide(nanoseconds, 1_000_000_000)
        let micros = (nanoseconds - seconds * 1_000_000_000) / 1000
        let days = floorDivide(seconds, 86400), secondOfDay = seconds - days * 86400
        let (year, month, day) = CivilDate.date(days: days)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):"
            + "\(pad(secondOfDay % 60, 2)).\(pad(micros, 6))Z"
    }

    /// A header field: PRINTUSASCII only (others become '?'), at most `limit` octets, NILVALUE when empty.
    static func appendHeaderField(_ text: String, limit: Int, to out: inout [UInt8]) {
        var count = 0
        for byte in text.utf8 where count < limit {
            out.append((33...126).contains(byte) ? byte : UInt8(ascii: "?"))
            count += 1
        }
        if count == 0 { out.append(UInt8(ascii: "-")) }
    }

    /// An SD-NAME (an SD-ID or PARAM-NAME): 1 to 32 PRINTUSASCII except '=', SP, ']' and '"'.
    static func appendName(_ text: String, to out: inout [UInt8]) {
        var count = 0
        for byte in text.utf8 where count < 32 {
            let allowed = (33...126).contains(byte) && byte != UInt8(ascii: "=") && byte != UInt8(ascii: "]")
                && byte != UInt8(ascii: "\"")
            out.append(allowed ? byte : UInt8(ascii: "_"))
            count += 1
        }
        if count == 0 { out.append(UInt8(ascii: "_")) }
    }

    /// A PARAM-VALUE: UTF-8 with '"', '\' and ']' escaped by a backslash.
    static func appendValue(_ text: String, to out: inout [UInt8]) {
        for byte in text.utf8 {
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "]") {
                out.append(UInt8(ascii: "\\"))
            }
            out.append(byte)
        }
    }

    /// `[logbook@PEN thread=".." file=".." line=".." function=".." error.type=".." error.message=".."]`
    /// then `[meta@PEN key="value" ...]` for the metadata (nested keys joined with '.'), in at most
    /// `budget` bytes: parameters that do not fit are left out, the first of them cut inside its
    /// value (at a character, never inside an escape, ending with "…"); an element always closes.
    /// NILVALUE when not even the first element's name fits.
    private func structuredData(of entry: LogEntry, budget: Int) -> (bytes: [UInt8], cut: Bool) {
        var logbook: [(String, String)] = [("thread", String(entry.threadID))]
        if let file = entry.file {
            logbook.append(("file", file))
            logbook.append(("line", String(entry.line)))
        }
        if let function = entry.function { logbook.append(("function", function)) }
        if let error = entry.error {
            logbook.append(("error.type", error.type))
            logbook.append(("error.message", error.description))
        }
        var elements = [("logbook@\(enterpriseNumber)", logbook)]
        if !entry.metadata.isEmpty {
            var meta: [(String, String)] = []
            func flatten(_ metadata: LogMetadata, prefix: String) {
                for pair in metadata.pairs {
                    let key = prefix.isEmpty ? pair.key : prefix + "." + pair.key
                    if case .map(let nested) = pair.value { flatten(nested, prefix: key) } else { meta.append((key, pair.value.string ?? pair.value.description)) }
                }
            }
            flatten(entry.metadata, prefix: "")
            elements.append(("meta@\(enterpriseNumber)", meta))
        }
        var out: [UInt8] = []
        var cut = false
        elements: for (id, params) in elements {
            var element: [UInt8] = [UInt8(ascii: "[")]
            Self.appendName(id, to: &element)
            if out.count + element.count + 1 > budget {
                cut = true
                break
            }
            for (name, value) in params {
                var param: [UInt8] = [0x20]
                Self.appendName(name, to: &param)
                param += [UInt8(ascii: "="), UInt8(ascii: "\"")]
                let closing = 2  // '"' and the element's ']'
                var escaped: [UInt8] = []
                Self.appendValue(value, to: &escaped)
                if out.count + element.count + param.count + escaped.count + closing <= budget {
                    element += param + escaped + [UInt8(ascii: "\"")]
                    continue
                }
                // The first parameter that does not fit: as much of its value as does, then stop.
                cut = true
                let ellipsis = Array("…".utf8)
                var room = budget - out.count - element.count - param.count - closing - ellipsis.count
                if room > 0 {
                    for scalar in value.unicodeScalars {
                        var piece: [UInt8] = []
                        Self.appendValue(String(scalar), to: &piece)
                        if piece.count > room { break }
                        param += piece
                        room -= piece.count
                    }
                    element += param + ellipsis + [UInt8(ascii: "\"")]
                }
                out += element + [UInt8(ascii: "]")]
                break elements
            }
            out += element + [UInt8(ascii: "]")]
        }
        return (out.isEmpty ? [UInt8(ascii: "-")] : out, cut)
    }
}
