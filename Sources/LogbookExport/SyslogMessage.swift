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
        appendStructuredData(of: entry, to: &out)
        let message = Array(entry.message.utf8)
        guard !message.isEmpty else { return fit(out, truncated: false) }
        out.append(0x20)
        if message.contains(where: { $0 >= 0x80 }) { out += [0xEF, 0xBB, 0xBF] }  // MSG-UTF8 starts with a BOM
        out += message
        return fit(out, truncated: false)
    }

    /// The message framed by octet counting: its length in decimal, a space, the message.
    public func frame(for entry: LogEntry) -> (bytes: [UInt8], truncated: Bool) {
        let (bytes, truncated) = message(for: entry)
        return (Array("\(bytes.count) ".utf8) + bytes, truncated)
    }

    static let truncationMarker = Array("…[truncated]".utf8)

    /// Cuts a message longer than `maximumBytes` at a UTF-8 boundary and ends it with the marker.
    private func fit(_ bytes: [UInt8], truncated: Bool) -> (bytes: [UInt8], truncated: Bool) {
        guard bytes.count > maximumBytes else { return (bytes, truncated) }
        var end = maximumBytes - Self.truncationMarker.count
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
    /// then `[meta@PEN key="value" ...]` for the metadata (nested keys joined with '.').
    private func appendStructuredData(of entry: LogEntry, to out: inout [UInt8]) {
        func param(_ name: String, _ value: String) {
            out.append(0x20)
            Self.appendName(name, to: &out)
            out += [UInt8(ascii: "="), UInt8(ascii: "\"")]
            Self.appendValue(value, to: &out)
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "["))
        Self.appendName("logbook@\(enterpriseNumber)", to: &out)
        param("thread", String(entry.threadID))
        if let file = entry.file {
            param("file", file)
            param("line", String(entry.line))
        }
        if let function = entry.function { param("function", function) }
        if let error = entry.error {
            param("error.type", error.type)
            param("error.message", error.description)
        }
        out.append(UInt8(ascii: "]"))
        guard !entry.metadata.isEmpty else { return }
        out.append(UInt8(ascii: "["))
        Self.appendName("meta@\(enterpriseNumber)", to: &out)
        func flatten(_ metadata: LogMetadata, prefix: String) {
            for pair in metadata.pairs {
                let key = prefix.isEmpty ? pair.key : prefix + "." + pair.key
                if case .map(let nested) = pair.value { flatten(nested, prefix: key) } else { param(key, pair.value.string ?? pair.value.description) }
            }
        }
        flatten(entry.metadata, prefix: "")
        out.append(UInt8(ascii: "]"))
    }
}
