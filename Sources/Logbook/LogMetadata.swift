import CLogbook
import Synchronization

/// A structured metadata value of a recorded entry (swift-log's `Logger.MetadataValue`, typed).
/// Not `indirect`: lists and maps already live in arrays, so a scalar value needs no box.
public enum LogMetadataValue: Equatable, Sendable, CustomStringConvertible {
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

        public init(key: String, value: LogMetadataValue) {
            self.key = key
            self.value = value
        }
    }

    /// Where the pairs are: sorted (metadata read back, or built from pairs), or a log call's
    /// literal as the compiler handed it over, in the writer's order and possibly with a repeated
    /// key. A literal is written to a record as it is, without repeats on the way
    /// (`writeLiteral`), so a log call with metadata neither copies nor sorts an array.
    @usableFromInline
    enum Storage: Sendable {
        case sorted([Pair])
        case literal([(String, LogMetadataValue)])
    }

    @usableFromInline var storage: Storage

    /// The pairs, sorted by key, each key once.
    public var pairs: [Pair] {
        get {
            switch storage {
            case .sorted(let pairs): return pairs
            case .literal(let elements): return Self.normalized(elements)
            }
        }
        set { storage = .sorted(Self.normalized(newValue)) }
    }

    /// Metadata of these pairs, sorted by key; of pairs with the same key, the last is kept (as in
    /// a literal).
    public init(_ pairs: [Pair] = []) {
        storage = .sorted(Self.normalized(pairs))
    }

    /// Whether there is no pair.
    @inlinable
    public var isEmpty: Bool {
        switch storage {
        case .sorted(let pairs): return pairs.isEmpty
        case .literal(let elements): return elements.isEmpty
        }
    }

    public static func == (lhs: LogMetadata, rhs: LogMetadata) -> Bool { lhs.pairs == rhs.pairs }

    /// A literal's pairs sorted by key, a repeated key keeping its last value.
    @usableFromInline
    static func normalized(_ elements: [(String, LogMetadataValue)]) -> [Pair] {
        normalized(elements.map { Pair(key: $0.0, value: $0.1) })
    }

    /// Pairs sorted by key (stable), a repeated key keeping its last value.
    static func normalized(_ pairs: [Pair]) -> [Pair] {
        var pairs = pairs
        sortByKey(&pairs)
        var kept = 0
        for index in pairs.indices {
            if index + 1 < pairs.count && pairs[index + 1].key == pairs[index].key { continue }
            if kept != index { pairs.swapAt(kept, index) }
            kept += 1
        }
        if kept < pairs.count { pairs.removeSubrange(kept...) }
        return pairs
    }

    /// A stable insertion sort in place: metadata has a handful of keys, often already in order,
    /// and pairs with the same key keep their order (which the literal's "last one wins" needs).
    static func sortByKey(_ pairs: inout [Pair]) {
        guard pairs.count > 1 else { return }
        for i in 1..<pairs.count {
            var j = i
            while j > 0 && pairs[j].key < pairs[j - 1].key {
                pairs.swapAt(j, j - 1)
                j -= 1
            }
        }
    }

    public var startIndex: Int { pairs.startIndex }
    public var endIndex: Int { pairs.endIndex }
    public subscript(position: Int) -> Pair { pairs[position] }
    /// Iterates one sorted copy (a literal's indices would sort it at every step).
    public func makeIterator() -> IndexingIterator<[Pair]> { pairs.makeIterator() }

    /// The value of the first pair with this key.
    public subscript(key: String) -> LogMetadataValue? {
        switch storage {
        case .sorted(let pairs): return pairs.first { $0.key == key }?.value
        case .literal(let elements): return elements.last { $0.0 == key }?.1
        }
    }

    public var description: String {
        var renderer = LineRenderer(capacity: 64)
        renderer.appendMetadataText(.map(self), .none)
        return String(decoding: renderer.bytes, as: UTF8.self)
    }
}

/// An error attached to a recorded entry (`error:` of a log call): its type and its description.
public struct LoggedError: Equatable, Sendable, CustomStringConvertible {
    /// The error's type, as `String(reflecting:)` names it, e.g. `MyApp.FetchError`.
    public var type: String
    /// `String(describing: error)`.
    public var description: String

    public init(type: String, description: String) {
        self.type = type
        self.description = description
    }

    /// What a log call records of `error`. The type name drops the "(unknown context at $55e5…)."
    /// parts Swift gives types declared inside functions, which differ from run to run.
    public init(_ error: any Error) {
        let (name, description) = ErrorType.withValue(in: error) { ($0.name, $0.describeValue($1)) }
        self.init(type: name, description: description)
    }

    static func typeName(_ type: any Error.Type) -> String { ErrorType.of(type).name }

    /// Appends the error to the record being built: the last part of a record (logbook_format.h).
    @_spi(LogbookBackend)
    public func write(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_container(writer, UInt8(LB_ARG_ERROR.rawValue), 2)
        type.writeLogArgument(to: writer)
        description.writeLogArgument(to: writer)
    }

    /// Appends what a log call records of `error` (``init(_:)``) to the record being built.
    @_spi(LogbookBackend)
    public static func write(_ error: any Error, to writer: UnsafeMutablePointer<lb_writer>) { writeError(error, to: writer) }

    @usableFromInline
    static func writeError(_ error: any Error, to writer: UnsafeMutablePointer<lb_writer>) {
        ErrorType.withValue(in: error) { $0.write(valueAt: $1, to: writer) }
    }

    /// `writeError` for an error of a concrete type: described where it is, never boxed.
    @inlinable @inline(__always)
    static func writeTypedError<E: Error>(_ error: borrowing E, to writer: UnsafeMutablePointer<lb_writer>) {
        if E.self == (any Error).self {
            // `any Error` as a generic argument (from generic code of the caller's): its box.
            return writeError(unsafeBitCast(copy error, to: (any Error).self), to: writer)
        }
        let errorType = ErrorType.of(Swift.type(of: copy error))
        withUnsafePointer(to: error) { errorType.write(valueAt: UnsafeRawPointer($0), to: writer) }
    }
}

// MARK: - Building metadata in a log call

extension LogMetadata: ExpressibleByDictionaryLiteral {
    /// `["path": "/v1/items", "status": 200, "tags": ["a", "b"]]`; a repeated key keeps its last value.
    ///
    /// Inlinable, and keeping the compiler's array as it is: in a log call the literal is built,
    /// written and released in the caller, so its array can live on the stack.
    @inlinable
    public init(dictionaryLiteral elements: (String, LogMetadataValue)...) {
        storage = .literal(elements)
    }

    /// Appends the pairs to the record being built, after the message's arguments: a literal in its
    /// order, other metadata sorted by key,
    /// a repeated key once (its last value).
    @_spi(LogbookBackend)
    @inlinable
    public func write(to writer: UnsafeMutablePointer<lb_writer>) { writePairs(to: writer) }

    @inlinable @inline(__always)
    func writePairs(to writer: UnsafeMutablePointer<lb_writer>) {
        switch storage {
        case .sorted(let pairs):
            Self.writeSorted(pairs, to: writer)
        case .literal(let elements):
            elements.withUnsafeBufferPointer { Self.writeLiteral($0, to: writer) }
        }
    }

    /// The pairs of a call's literal as they are, in the call's order (readers sort by key): no
    /// copy, no sort. Of a repeated key only the last pair is written.
    @inlinable @inline(__always)
    static func writeLiteral(
        _ elements: UnsafeBufferPointer<(String, LogMetadataValue)>, to writer: UnsafeMutablePointer<lb_writer>
    ) {
        let count = elements.count
        guard count <= 64 else {
            writeLongLiteral(elements, to: writer)
            return
        }
        // The pairs whose key comes again later (as `==` says: "é" is "e\u{301}"), as bits.
        let usable = StringBits.isUsable
        var repeated: UInt64 = 0
        for index in 0..<count {
            var later = index + 1
            while later < count {
                if StringBits.equal(elements[later].0, elements[index].0, usable: usable) {
                    repeated |= 1 << index
                    break
                }
                later += 1
            }
        }
        lb_record_put_container(
            writer, UInt8(LB_ARG_METADATA.rawValue), UInt32(truncatingIfNeeded: count - repeated.nonzeroBitCount))
        for index in 0..<count where repeated & (1 << index) == 0 {
            writeKey(elements[index].0, to: writer, usable: usable)
            elements[index].1.write(to: writer, depth: 2)
        }
    }

    @usableFromInline
    static func writeLongLiteral(
        _ elements: UnsafeBufferPointer<(String, LogMetadataValue)>, to writer: UnsafeMutablePointer<lb_writer>
    ) {
        writeSorted(normalized(Array(elements)), to: writer)
    }

    /// A key: most are small strings, whose bytes are written from the string's own words.
    @inlinable @inline(__always)
    static func writeKey(_ key: String, to writer: UnsafeMutablePointer<lb_writer>, usable: Bool) {
        if let words = StringBits.smallWords(key, usable: usable) {
            let count = StringBits.byteCount(ofSmall: words)
            // With 21 bytes of room: the tag, the length and both words with the flags byte zeroed
            // (a small string's bytes past its count are zero), in three stores, no copy call; the
            // zeros past the key land where the record goes on (or in its padding).
            if let cur = writer.pointee.cur, let end = writer.pointee.end, end - cur >= 21 {
                let raw = UnsafeMutableRawPointer(cur)
                raw.storeBytes(of: LogArgumentType.string.rawValue, as: UInt8.self)
                raw.storeBytes(of: UInt32(truncatingIfNeeded: count).littleEndian, toByteOffset: 1, as: UInt32.self)
                raw.storeBytes(of: words.0, toByteOffset: 5, as: UInt64.self)
                raw.storeBytes(of: words.1 & 0x00FF_FFFF_FFFF_FFFF, toByteOffset: 13, as: UInt64.self)
                writer.pointee.cur = cur + 5 + count
                return
            }
            withUnsafeBytes(of: words) {
                lb_record_put_data(writer, LogArgumentType.string.rawValue, $0.baseAddress, count)
            }
        } else {
            key.writeLogArgument(to: writer)
        }
    }

    @usableFromInline
    static func writeSorted(_ pairs: [Pair], to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_container(writer, UInt8(LB_ARG_METADATA.rawValue), UInt32(truncatingIfNeeded: pairs.count))
        for pair in pairs {
            pair.key.writeLogArgument(to: writer)
            pair.value.write(to: writer, depth: 2)
        }
    }

}

extension LogMetadataValue: ExpressibleByStringInterpolation, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    @inlinable
    public init(stringLiteral value: String) { self = .value(.string(value, isStatic: false)) }
    /// `"/v1/\(item)"` is a string; `"\(user, privacy: .private)"` is withheld (see
    /// ``StringInterpolation``).
    @inlinable
    public init(stringInterpolation: StringInterpolation) {
        if stringInterpolation.isPrivate {
            self = .value(.redacted(.string))
        } else if let whole = stringInterpolation.whole {
            self = .value(.string(whole, isStatic: false))
        } else {
            self = .value(.string(String(stringInterpolation: stringInterpolation.text), isStatic: false))
        }
    }
    @inlinable
    public init(integerLiteral value: Int) { self.init(value) }
    @inlinable
    public init(floatLiteral value: Double) { self = .value(.double(value)) }
    @inlinable
    public init(booleanLiteral value: Bool) { self = .value(.bool(value)) }
    public init(arrayLiteral elements: LogMetadataValue...) { self = .list(elements) }
    public init(dictionaryLiteral elements: (String, LogMetadataValue)...) {
        self = .map(LogMetadata(elements.map { LogMetadata.Pair(key: $0.0, value: $0.1) }))
    }

    /// A string.
    @inlinable
    public init(_ value: String) { self = .value(.string(value, isStatic: false)) }
    /// A number stored with its width and signedness (`Int` as `int`, `UInt32` as `uint32`…).
    @inlinable
    public init<T: FixedWidthInteger>(_ value: T) {
        let type: LogArgumentType
        switch (T.isSigned, T.bitWidth) {
        case (true, 8): type = .int8
        case (true, 16): type = .int16
        case (true, 32): type = .int32
        case (true, _): type = T.self == Int.self ? .int : .int64
        case (false, 8): type = .uint8
        case (false, 16): type = .uint16
        case (false, 32): type = .uint32
        case (false, _): type = T.self == UInt.self ? .uint : .uint64
        }
        self = T.isSigned ? .value(.signed(Int64(truncatingIfNeeded: value), type))
                          : .value(.unsigned(UInt64(truncatingIfNeeded: value), type))
    }
    @inlinable
    public init(_ value: Double) { self = .value(.double(value)) }
    @inlinable
    public init(_ value: Float) { self = .value(.float(value)) }
    @inlinable
    public init(_ value: Bool) { self = .value(.bool(value)) }
    /// Raw bytes (shown as hex).
    public init(bytes: [UInt8]) { self = .value(.bytes(bytes)) }

    // MARK: Withheld values

    /// A value that never reaches the disk: only its type is recorded, and the reader, `logbook
    /// show` and its JSON show it as a message argument logged with `privacy: .private` (`<private>`;
    /// in JSON, null):
    ///
    /// ```swift
    /// log.warning("login failed", metadata: ["user": .private(user), "attempt": 3])
    /// ```
    ///
    /// The value is not kept: it only tells the type that is recorded.
    public static func `private`<Value: LogArgument>(_ value: Value) -> LogMetadataValue {
        .value(.redacted(Value.logArgumentType))
    }

    /// A value of your own type, withheld (only the type it logs as is recorded).
    public static func `private`<Value: LogArgumentConvertible>(_ value: Value) -> LogMetadataValue {
        .value(.redacted(Value.Argument.logArgumentType))
    }

    /// A metadata value, withheld: a list or map is recorded as a withheld string.
    public static func `private`(_ value: LogMetadataValue) -> LogMetadataValue {
        if case .value(let scalar) = value { return .value(.redacted(scalar.type)) }
        return .value(.redacted(.string))
    }

    /// Builds a string value by interpolation, like a `String`, where a part can be withheld as in
    /// a message: `"\(user, privacy: .private)"`. A metadata value is one value, so a value with a
    /// private part is withheld whole: only its type (a string) is recorded, and it reads
    /// `<private>`.
    ///
    /// Every method is `@inlinable`, as `DefaultStringInterpolation`'s are: the interpolation is
    /// specialized at the call site (unspecialized, `"\(path)"` cost a metadata call 9% more).
    /// A value that is one `String`, `"\(path)"`, is that string: no copy.
    public struct StringInterpolation: StringInterpolationProtocol {
        @usableFromInline var text: DefaultStringInterpolation
        /// The string that is the whole value so far, when it is one interpolated `String`.
        @usableFromInline var whole: String? = nil
        /// Whether nothing was appended yet.
        @usableFromInline var isEmpty = true
        /// Whether a part was interpolated with `privacy: .private`.
        @usableFromInline var isPrivate = false

        @inlinable
        public init(literalCapacity: Int, interpolationCount: Int) {
            text = DefaultStringInterpolation(literalCapacity: literalCapacity, interpolationCount: interpolationCount)
        }

        /// Before a second part: the one string so far goes into the text.
        @inlinable
        mutating func beginPart() {
            isEmpty = false
            if let whole {
                text.appendInterpolation(whole)
                self.whole = nil
            }
        }

        @inlinable
        public mutating func appendLiteral(_ literal: String) {
            guard !literal.isEmpty else { return }
            beginPart()
            text.appendLiteral(literal)
        }

        @inlinable
        public mutating func appendInterpolation(_ value: String) {
            if isEmpty {
                isEmpty = false
                whole = value
            } else {
                beginPart()
                text.appendInterpolation(value)
            }
        }

        // Any value, as in a `String`: the overloads of `DefaultStringInterpolation`, so that each
        // type takes the same path (and costs the same) as it did before privacy was possible.
        @inlinable
        public mutating func appendInterpolation<Value: TextOutputStreamable & CustomStringConvertible>(_ value: Value) {
            beginPart()
            text.appendInterpolation(value)
        }
        @inlinable
        public mutating func appendInterpolation<Value: TextOutputStreamable>(_ value: Value) {
            beginPart()
            text.appendInterpolation(value)
        }
        @inlinable
        public mutating func appendInterpolation<Value: CustomStringConvertible>(_ value: Value) {
            beginPart()
            text.appendInterpolation(value)
        }
        @inlinable
        public mutating func appendInterpolation<Value>(_ value: Value) {
            beginPart()
            text.appendInterpolation(value)
        }

        /// Any value, withheld (with `.private`) or shown as `String(describing:)` does.
        @inlinable
        public mutating func appendInterpolation<Value>(_ value: Value, privacy: LogPrivacy) {
            beginPart()
            switch privacy {
            case .public: text.appendInterpolation(value)
            case .private: isPrivate = true
            }
        }
    }

    /// `depth` counts the open containers including this value's own: past the format's limit
    /// (`LB_ARG_MAX_DEPTH`) a list or map is stored as its text.
    @inlinable @inline(__always)
    func write(to writer: UnsafeMutablePointer<lb_writer>, depth: Int) {
        if case .value(let value) = self {
            value.write(to: writer)
        } else {
            writeContainer(to: writer, depth: depth)
        }
    }

    @usableFromInline
    func writeContainer(to writer: UnsafeMutablePointer<lb_writer>, depth: Int) {
        switch self {
        case .value(let value):
            value.write(to: writer)
        case .list(let items) where depth <= Int(LB_ARG_MAX_DEPTH):
            lb_record_put_container(writer, UInt8(LB_ARG_LIST.rawValue), UInt32(truncatingIfNeeded: items.count))
            for item in items { item.write(to: writer, depth: depth + 1) }
        case .map(let map) where depth <= Int(LB_ARG_MAX_DEPTH):
            lb_record_put_container(writer, UInt8(LB_ARG_MAP.rawValue), UInt32(truncatingIfNeeded: map.count))
            for pair in map.pairs {
                pair.key.writeLogArgument(to: writer)
                pair.value.write(to: writer, depth: depth + 1)
            }
        case .list, .map:
            description.writeLogArgument(to: writer)
        }
    }
}

extension LogValue {
    /// Appends the value with its type, as the reader decoded it (a static string stays static).
    /// Inlinable: in a log call's literal the case is known where the value is built.
    @inlinable @inline(__always)
    func write(to writer: UnsafeMutablePointer<lb_writer>) {
        switch self {
        case .bool(let value):
            lb_record_put_bool(writer, value)
        case .signed(let value, let type):
            switch type {
            case .int8: lb_record_put_i8(writer, Int8(truncatingIfNeeded: value))
            case .int16: lb_record_put_i16(writer, Int16(truncatingIfNeeded: value))
            case .int32: lb_record_put_i32(writer, Int32(truncatingIfNeeded: value))
            case .int: lb_record_put_int(writer, value)
            default: lb_record_put_i64(writer, value)
            }
        case .unsigned(let value, let type):
            switch type {
            case .uint8: lb_record_put_u8(writer, UInt8(truncatingIfNeeded: value))
            case .uint16: lb_record_put_u16(writer, UInt16(truncatingIfNeeded: value))
            case .uint32: lb_record_put_u32(writer, UInt32(truncatingIfNeeded: value))
            case .uint: lb_record_put_uint(writer, value)
            default: lb_record_put_u64(writer, value)
            }
        case .float(let value):
            lb_record_put_f32(writer, value)
        case .double(let value):
            lb_record_put_f64(writer, value)
        case .string(var text, let isStatic):
            let tag = isStatic ? LogArgumentType.staticString : .string
            text.withUTF8 { lb_record_put_data(writer, tag.rawValue, $0.baseAddress, $0.count) }
        case .bytes(let bytes):
            bytes.withUnsafeBufferPointer {
                lb_record_put_data(writer, LogArgumentType.bytes.rawValue, $0.baseAddress, $0.count)
            }
        case .redacted(let type):
            lb_record_put_redacted(writer, type.rawValue)
        }
    }
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
