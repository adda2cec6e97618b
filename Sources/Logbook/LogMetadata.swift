import CLogbook

/// A structured metadata value of a recorded entry (swift-log's `Logger.MetadataValue`, typed).
public indirect enum LogMetadataValue: Equatable, Sendable, CustomStringConvertible {
    /// A scalar or string, stored with its type.
    case value(LogValue)
    case list([LogMetadataValue])
    /// Key/value pairs, sorted by key.
    case map(LogMetadata)

    /// Text as in a rendered line: `42`, `GET`, `[1, 2]`, `{a=1, b=x}`.
    public var description: String {
        var renderer = LineRenderer(capacity: 64)
        renderer.appendMetadataText(self, .none)
        return String(decoding: renderer.bytes, as: UTF8.self)
    }

    /// The string, when the value is one.
    public var string: String? {
        if case .value(.string(let text, _)) = self { return text }
        return nil
    }
}

/// The metadata of a recorded entry: key/value pairs sorted by key (the order a writer used is
/// not kept: swift-log's metadata is a dictionary).
public struct LogMetadata: Equatable, Sendable, RandomAccessCollection, CustomStringConvertible {
    public struct Pair: Equatable, Sendable {
        public var key: String
        public var value: LogMetadataValue
    }

    public var pairs: [Pair]

    public init(_ pairs: [Pair] = []) {
        self.pairs = pairs.sorted { $0.key < $1.key }
    }

    public var startIndex: Int { pairs.startIndex }
    public var endIndex: Int { pairs.endIndex }
    public subscript(position: Int) -> Pair { pairs[position] }

    /// The value of the first pair with this key.
    public subscript(key: String) -> LogMetadataValue? { pairs.first { $0.key == key }?.value }

    public var description: String {
        var renderer = LineRenderer(capacity: 64)
        renderer.appendMetadataText(.map(self), .none)
        return String(decoding: renderer.bytes, as: UTF8.self)
    }
}

/// An error attached to a recorded entry (swift-log's `error:`): its type and its description.
public struct LoggedError: Equatable, Sendable, CustomStringConvertible {
    /// The error's type, as `String(reflecting:)` names it, e.g. `MyApp.FetchError`.
    public var type: String
    /// `String(describing: error)`.
    public var description: String
}

/// Decodes the part of a record's arguments after the message: its metadata and error. The C
/// reader has checked the structure (counts, nesting, keys) before an entry reaches Swift; this
/// still never reads past the arguments it is given.
struct RecordTailDecoder {
    let args: UnsafePointer<UInt8>?
    let length: UInt32
    var offset: UInt32

    mutating func next() -> lb_arg? {
        var arg = lb_arg()
        return lb_arg_next(args, length, &offset, &arg) == 1 ? arg : nil
    }

    mutating func value(_ arg: lb_arg, depth: Int) -> LogMetadataValue {
        switch Int(arg.type) {
        case Int(LB_ARG_LIST.rawValue):
            var items: [LogMetadataValue] = []
            for _ in 0..<arg.value.u where depth < Int(LB_ARG_MAX_DEPTH) {
                guard let item = next() else { break }
                items.append(value(item, depth: depth + 1))
            }
            return .list(items)
        case Int(LB_ARG_MAP.rawValue):
            return .map(LogMetadata(pairs(count: arg.value.u, depth: depth + 1)))
        default:
            return .value(LogValue(arg) ?? .string("", isStatic: false))
        }
    }

    mutating func pairs(count: UInt64, depth: Int) -> [LogMetadata.Pair] {
        var pairs: [LogMetadata.Pair] = []
        for _ in 0..<count where depth <= Int(LB_ARG_MAX_DEPTH) {
            guard let key = next(), let item = next() else { break }
            let name = LogValue(key)?.description ?? ""
            pairs.append(LogMetadata.Pair(key: name, value: value(item, depth: depth)))
        }
        return pairs
    }

    mutating func strings(count: UInt64) -> [String] {
        (0..<count).compactMap { _ in next().flatMap(LogValue.init)?.description }
    }
}
