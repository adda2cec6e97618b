import Logbook
import LogbookUpload

/// The trace context a record's metadata carries, exported as OTLP's `traceId`, `spanId` and
/// `flags` rather than as attributes:
///
/// - swift-otel's logging metadata provider (`Logger.MetadataProvider.otel`, its default keys):
///   `trace_id` (32 hex digits), `span_id` (16 hex digits) and `trace_flags` (a byte: decimal text,
///   as swift-otel writes it, or an integer);
/// - a W3C `traceparent` (`00-TRACEID-SPANID-FLAGS`), when those keys are absent.
///
/// The keys used are not sent as attributes too. A value that does not parse (another length, not
/// hex, an all-zero id, a version other than 00) is left alone: it stays an attribute.
struct TraceContext: Equatable {
    var traceID: [UInt8]  // 16 bytes
    var spanID: [UInt8]   // 8 bytes
    var flags: UInt32
    /// The metadata keys it came from.
    var keys: [String]

    static let traceIDKey = "trace_id", spanIDKey = "span_id", flagsKey = "trace_flags", traceparentKey = "traceparent"

    /// The context in `pairs` (sorted by key), or nil. Cheap when there is none: one pass comparing
    /// keys that start with "t".
    static func find(in pairs: [LogMetadata.Pair]) -> TraceContext? {
        var traceID: String?, spanID: String?, flags: UInt8?, traceparent: String?
        for pair in pairs where pair.key.utf8.first == UInt8(ascii: "t") {
            if pair.key == flagsKey {  // a decimal string, as swift-otel writes it, or an integer
                switch pair.value {
                case .value(.string(let text, _)): flags = UInt8(text)
                case .value(.signed(let number, _)): flags = UInt8(exactly: number)
                case .value(.unsigned(let number, _)): flags = UInt8(exactly: number)
                default: break
                }
                continue
            }
            guard case .value(.string(let text, _)) = pair.value else { continue }
            switch pair.key {
            case traceIDKey: traceID = text
            case traceparentKey: traceparent = text
            default: break
            }
        }
        if traceID != nil {
            for pair in pairs where pair.key == spanIDKey {
                if case .value(.string(let text, _)) = pair.value { spanID = text }
            }
        }
        if let traceID, let spanID, let trace = hex(traceID, bytes: 16), let span = hex(spanID, bytes: 8) {
            var keys = [traceIDKey, spanIDKey]
            var value: UInt32 = 0
            if let flags {
                value = UInt32(flags)
                keys.append(flagsKey)
            }
            return TraceContext(traceID: trace, spanID: span, flags: value, keys: keys)
        }
        if let traceparent {
            let parts = traceparent.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 4, parts[0] == "00", let trace = hex(String(parts[1]), bytes: 16),
                  let span = hex(String(parts[2]), bytes: 8), let flags = hex(String(parts[3]), bytes: 1) else { return nil }
            return TraceContext(traceID: trace, spanID: span, flags: UInt32(flags[0]), keys: [traceparentKey])
        }
        return nil
    }

    /// `count` bytes from exactly twice as many hex digits (either case); ids must not be all zero.
    static func hex(_ text: String, bytes count: Int) -> [UInt8]? {
        guard let bytes = SHA256.bytes(hex: text, count: count) else { return nil }
        return count == 1 || bytes.contains(where: { $0 != 0 }) ? bytes : nil
    }
}
