import Foundation

// The compact binary encoding offered for cached messages (`MessageEncoding.compactBinary`): a
// self-describing tree of tagged values, so a message type may gain optional fields, as with
// JSON, at about half JSON's size and several times its speed. The bytes are in docs/FORMAT.md,
// "Cache", "Compact binary messages".

/// One encoded value.
enum CompactNode {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case float(Float)
    case string(String)
    case bytes([UInt8])
    case array(CompactArray)
    case keyed(CompactKeyed)
}

final class CompactArray {
    var items: [CompactNode] = []
}

final class CompactKeyed {
    var keys: [String] = []
    var values: [CompactNode] = []

    func set(_ value: CompactNode, for key: String) {
        if let index = keys.firstIndex(of: key) {
            values[index] = value
        } else {
            keys.append(key)
            values.append(value)
        }
    }
}

enum CompactTag: UInt8 {
    case null = 0, `false` = 1, `true` = 2, int = 3, uint = 4, double = 5, float = 6, string = 7, bytes = 8
    case array = 9, keyed = 10
}

// MARK: - Writing

struct CompactWriter {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(128) }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func text(_ string: String) {
        var string = string
        string.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func write(_ node: CompactNode) {
        switch node {
        case .null: bytes.append(CompactTag.null.rawValue)
        case .bool(let value): bytes.append(value ? CompactTag.true.rawValue : CompactTag.false.rawValue)
        case .int(let value):
            bytes.append(CompactTag.int.rawValue)
            varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))  // zigzag
        case .uint(let value):
            bytes.append(CompactTag.uint.rawValue)
            varint(value)
        case .double(let value):
            bytes.append(CompactTag.double.rawValue)
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        case .float(let value):
            bytes.append(CompactTag.float.rawValue)
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        case .string(let value):
            bytes.append(CompactTag.string.rawValue)
            text(value)
        case .bytes(let value):
            bytes.append(CompactTag.bytes.rawValue)
            varint(UInt64(value.count))
            bytes.append(contentsOf: value)
        case .array(let array):
            bytes.append(CompactTag.array.rawValue)
            varint(UInt64(array.items.count))
            for item in array.items { write(item) }
        case .keyed(let keyed):
            bytes.append(CompactTag.keyed.rawValue)
            varint(UInt64(keyed.keys.count))
            for (key, value) in zip(keyed.keys, keyed.values) {
                text(key)
                write(value)
            }
        }
    }
}

/// Encodes `Encodable` values as compact binary.
public struct CompactBinaryEncoder: Sendable {
    public init() {}

    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let node = try CompactEncoding.node(for: value, codingPath: [])
        var writer = CompactWriter()
        writer.write(node)
        return writer.bytes
    }
}

final class CompactEncoding: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var storage: CompactNode?

    init(codingPath: [any CodingKey]) { self.codingPath = codingPath }

    static func node<T: Encodable>(for value: T, codingPath: [any CodingKey]) throws -> CompactNode {
        // By type, not by cast: an empty [Int32] casts to [UInt8].
        if T.self == Data.self { return .bytes(Array(value as! Data)) }
        if T.self == [UInt8].self { return .bytes(value as! [UInt8]) }
        let encoder = CompactEncoding(codingPath: codingPath)
        try value.encode(to: encoder)
        return encoder.storage ?? .keyed(CompactKeyed())
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let keyed: CompactKeyed
        if case .keyed(let existing) = storage {
            keyed = existing
        } else {
            keyed = CompactKeyed()
            storage = .keyed(keyed)
        }
        return KeyedEncodingContainer(CompactKeyedEncoding<Key>(keyed: keyed, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: CompactArray
        if case .array(let existing) = storage {
            array = existing
        } else {
            array = CompactArray()
            storage = .array(array)
        }
        return CompactUnkeyedEncoding(array: array, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { CompactSingleValueEncoding(encoder: self) }
}

struct CompactKeyedEncoding<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let keyed: CompactKeyed
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws { keyed.set(.null, for: key.stringValue) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { keyed.set(.bool(value), for: key.stringValue) }
    mutating func encode(_ value: String, forKey key: Key) throws { keyed.set(.string(value), for: key.stringValue) }
    mutating func encode(_ value: Double, forKey key: Key) throws { keyed.set(.double(value), for: key.stringValue) }
    mutating func encode(_ value: Float, forKey key: Key) throws { keyed.set(.float(value), for: key.stringValue) }
    mutating func encode(_ value: Int, forKey key: Key) throws { keyed.set(.int(Int64(value)), for: key.stringValue) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { keyed.set(.int(Int64(value)), for: key.stringValue) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { keyed.set(.int(Int64(value)), for: key.stringValue) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { keyed.set(.int(Int64(value)), for: key.stringValue) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { keyed.set(.int(value), for: key.stringValue) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { keyed.set(.uint(UInt64(value)), for: key.stringValue) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { keyed.set(.uint(UInt64(value)), for: key.stringValue) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { keyed.set(.uint(UInt64(value)), for: key.stringValue) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { keyed.set(.uint(UInt64(value)), for: key.stringValue) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { keyed.set(.uint(value), for: key.stringValue) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        keyed.set(try CompactEncoding.node(for: value, codingPath: codingPath + [key]), for: key.stringValue)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey> {
        let nested = CompactKeyed()
        keyed.set(.keyed(nested), for: key.stringValue)
        return KeyedEncodingContainer(CompactKeyedEncoding<NestedKey>(keyed: nested, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = CompactArray()
        keyed.set(.array(nested), for: key.stringValue)
        return CompactUnkeyedEncoding(array: nested, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: "super") }
    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key.stringValue) }

    private func superEncoder(named name: String) -> any Encoder {
        // The super encoder's value is written into a keyed box at once: a keyed or unkeyed
        // container it opens is a box that fills in place.
        let encoder = CompactSuperEncoding(codingPath: codingPath) { node in self.keyed.set(node, for: name) }
        return encoder
    }
}

/// An encoder whose value is stored into its parent as soon as it has one.
final class CompactSuperEncoding: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    let store: (CompactNode) -> Void
    let inner: CompactEncoding

    init(codingPath: [any CodingKey], store: @escaping (CompactNode) -> Void) {
        self.codingPath = codingPath
        self.store = store
        inner = CompactEncoding(codingPath: codingPath)
        store(.keyed(CompactKeyed()))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let container = inner.container(keyedBy: type)
        if let storage = inner.storage { store(storage) }
        return container
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let container = inner.unkeyedContainer()
        if let storage = inner.storage { store(storage) }
        return container
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        CompactSingleValueEncoding(encoder: inner) { [store] node in store(node) }
    }
}

struct CompactUnkeyedEncoding: UnkeyedEncodingContainer {
    let array: CompactArray
    let codingPath: [any CodingKey]
    var count: Int { array.items.count }

    private struct Index: CodingKey {
        var stringValue: String { "\(intValue!)" }
        var intValue: Int?
        init(_ index: Int) { intValue = index }
        init?(stringValue: String) { nil }
        init?(intValue: Int) { self.intValue = intValue }
    }

    mutating func encodeNil() throws { array.items.append(.null) }
    mutating func encode(_ value: Bool) throws { array.items.append(.bool(value)) }
    mutating func encode(_ value: String) throws { array.items.append(.string(value)) }
    mutating func encode(_ value: Double) throws { array.items.append(.double(value)) }
    mutating func encode(_ value: Float) throws { array.items.append(.float(value)) }
    mutating func encode(_ value: Int) throws { array.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { array.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { array.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { array.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { array.items.append(.int(value)) }
    mutating func encode(_ value: UInt) throws { array.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { array.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { array.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { array.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { array.items.append(.uint(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        array.items.append(try CompactEncoding.node(for: value, codingPath: codingPath + [Index(count)]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = CompactKeyed()
        let path = codingPath + [Index(count)]
        array.items.append(.keyed(nested))
        return KeyedEncodingContainer(CompactKeyedEncoding<NestedKey>(keyed: nested, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = CompactArray()
        let path = codingPath + [Index(count)]
        array.items.append(.array(nested))
        return CompactUnkeyedEncoding(array: nested, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let index = array.items.count
        array.items.append(.null)
        let array = self.array
        return CompactSuperEncoding(codingPath: codingPath + [Index(index)]) { node in array.items[index] = node }
    }
}

struct CompactSingleValueEncoding: SingleValueEncodingContainer {
    let encoder: CompactEncoding
    var store: ((CompactNode) -> Void)? = nil
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ node: CompactNode) {
        encoder.storage = node
        store?(node)
    }

    mutating func encodeNil() throws { set(.null) }
    mutating func encode(_ value: Bool) throws { set(.bool(value)) }
    mutating func encode(_ value: String) throws { set(.string(value)) }
    mutating func encode(_ value: Double) throws { set(.double(value)) }
    mutating func encode(_ value: Float) throws { set(.float(value)) }
    mutating func encode(_ value: Int) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { set(.int(value)) }
    mutating func encode(_ value: UInt) throws { set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { set(.uint(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        set(try CompactEncoding.node(for: value, codingPath: codingPath))
    }
}

// MARK: - Reading

/// Parses compact binary with every length checked against what is left, and nesting bounded.
struct CompactParser {
    let bytes: UnsafeRawBufferPointer
    var at = 0
    static let maximumDepth = 256

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    func damaged(_ what: String) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "compact binary at byte \(at): \(what)"))
    }

    mutating func byte() throws -> UInt8 {
        guard at < bytes.count else { throw damaged("the message ends early") }
        defer { at += 1 }
        return bytes[at]
    }

    mutating func varint() throws -> UInt64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 7) {
            let next = try byte()
            if shift == 63 && next > 1 { throw damaged("a number longer than 64 bits") }
            value |= UInt64(next & 0x7f) << shift
            if next < 0x80 { return value }
        }
        throw damaged("a number longer than 64 bits")
    }

    mutating func length() throws -> Int {
        let value = try varint()
        guard value <= UInt64(bytes.count - at) else { throw damaged("a length past the end") }
        return Int(value)
    }

    mutating func raw(_ count: Int) throws -> UnsafeRawBufferPointer {
        guard count <= bytes.count - at else { throw damaged("the message ends early") }
        defer { at += count }
        return UnsafeRawBufferPointer(rebasing: bytes[at..<(at + count)])
    }

    mutating func text() throws -> String {
        let utf8 = try raw(try length())
        guard let string = String(validating: utf8, as: UTF8.self) else { throw damaged("a string that is not UTF-8") }
        return string
    }

    mutating func node(depth: Int = 0) throws -> CompactNode {
        guard depth < Self.maximumDepth else { throw damaged("nested deeper than \(Self.maximumDepth)") }
        guard let tag = CompactTag(rawValue: try byte()) else { throw damaged("an unknown tag") }
        switch tag {
        case .null: return .null
        case .false: return .bool(false)
        case .true: return .bool(true)
        case .int:
            let zigzag = try varint()
            return .int(Int64(bitPattern: (zigzag >> 1) ^ (0 &- (zigzag & 1))))
        case .uint: return .uint(try varint())
        case .double:
            var bits: UInt64 = 0
            let raw = try raw(8)
            for i in 0..<8 { bits |= UInt64(raw[i]) << (8 * i) }
            return .double(Double(bitPattern: bits))
        case .float:
            let raw = try raw(4)
            var bits: UInt32 = 0
            for i in 0..<4 { bits |= UInt32(raw[i]) << (8 * i) }
            return .float(Float(bitPattern: bits))
        case .string: return .string(try text())
        case .bytes: return .bytes(Array(try raw(try length())))
        case .array:
            let count = try length()  // each item takes at least a byte
            let array = CompactArray()
            array.items.reserveCapacity(count)
            for _ in 0..<count { array.items.append(try node(depth: depth + 1)) }
            return .array(array)
        case .keyed:
            let count = try length()
            let keyed = CompactKeyed()
            for _ in 0..<count {
                let key = try text()
                keyed.set(try node(depth: depth + 1), for: key)
            }
            return .keyed(keyed)
        }
    }
}

/// Decodes what ``CompactBinaryEncoder`` wrote.
public struct CompactBinaryDecoder: Sendable {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        let node = try bytes.withUnsafeBytes { buffer in
            var parser = CompactParser(buffer)
            let node = try parser.node()
            guard parser.at == buffer.count else { throw parser.damaged("bytes after the value") }
            return node
        }
        return try CompactDecoding.value(type, from: node, codingPath: [])
    }
}

final class CompactDecoding: Decoder {
    let node: CompactNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(node: CompactNode, codingPath: [any CodingKey]) {
        self.node = node
        self.codingPath = codingPath
    }

    static func value<T: Decodable>(_ type: T.Type, from node: CompactNode, codingPath: [any CodingKey]) throws -> T {
        if case .bytes(let bytes) = node {  // Data and [UInt8] are written as bytes
            if type == Data.self { return Data(bytes) as! T }
            if type == [UInt8].self { return bytes as! T }
            throw mismatch(type, node, codingPath)
        }
        return try T(from: CompactDecoding(node: node, codingPath: codingPath))
    }

    static func mismatch(_ type: Any.Type, _ node: CompactNode, _ codingPath: [any CodingKey]) -> DecodingError {
        DecodingError.typeMismatch(type, .init(codingPath: codingPath, debugDescription: "found \(node)"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .keyed(let keyed) = node else { throw Self.mismatch([String: Any].self, node, codingPath) }
        return KeyedDecodingContainer(CompactKeyedDecoding<Key>(keyed: keyed, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let array) = node else { throw Self.mismatch([Any].self, node, codingPath) }
        return CompactUnkeyedDecoding(items: array.items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        CompactSingleValueDecoding(node: node, codingPath: codingPath)
    }
}

/// Scalars out of nodes, with range checks (an Int8 field given 300 is an error, not 44).
enum CompactScalar {
    static func integer<T: FixedWidthInteger>(_ type: T.Type, _ node: CompactNode, _ path: [any CodingKey]) throws -> T {
        switch node {
        case .int(let value): if let exact = T(exactly: value) { return exact }
        case .uint(let value): if let exact = T(exactly: value) { return exact }
        default: break
        }
        throw CompactDecoding.mismatch(type, node, path)
    }

    static func double(_ node: CompactNode, _ path: [any CodingKey]) throws -> Double {
        switch node {
        case .double(let value): return value
        case .float(let value): return Double(value)
        case .int(let value): return Double(value)
        case .uint(let value): return Double(value)
        default: throw CompactDecoding.mismatch(Double.self, node, path)
        }
    }

    static func bool(_ node: CompactNode, _ path: [any CodingKey]) throws -> Bool {
        guard case .bool(let value) = node else { throw CompactDecoding.mismatch(Bool.self, node, path) }
        return value
    }

    static func string(_ node: CompactNode, _ path: [any CodingKey]) throws -> String {
        guard case .string(let value) = node else { throw CompactDecoding.mismatch(String.self, node, path) }
        return value
    }
}

struct CompactKeyedDecoding<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let keyed: CompactKeyed
    let codingPath: [any CodingKey]

    var allKeys: [Key] { keyed.keys.compactMap { Key(stringValue: $0) } }
    func contains(_ key: Key) -> Bool { keyed.keys.contains(key.stringValue) }

    private func node(_ key: Key) throws -> CompactNode {
        guard let index = keyed.keys.firstIndex(of: key.stringValue) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no value for \(key.stringValue)"))
        }
        return keyed.values[index]
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        if case .null = try node(key) { return true }
        return false
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try CompactScalar.bool(node(key), codingPath + [key]) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try CompactScalar.string(node(key), codingPath + [key]) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try CompactScalar.double(node(key), codingPath + [key]) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try CompactScalar.double(node(key), codingPath + [key])) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try CompactScalar.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try CompactScalar.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try CompactScalar.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try CompactScalar.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try CompactScalar.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try CompactScalar.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try CompactScalar.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try CompactScalar.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try CompactScalar.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try CompactScalar.integer(type, node(key), codingPath + [key]) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try CompactDecoding.value(type, from: node(key), codingPath: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey> {
        try CompactDecoding(node: node(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try CompactDecoding(node: node(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        CompactDecoding(node: keyed.keys.firstIndex(of: "super").map { keyed.values[$0] } ?? .null, codingPath: codingPath)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        CompactDecoding(node: (try? node(key)) ?? .null, codingPath: codingPath + [key])
    }
}

struct CompactUnkeyedDecoding: UnkeyedDecodingContainer {
    let items: [CompactNode]
    let codingPath: [any CodingKey]
    var currentIndex = 0
    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    init(items: [CompactNode], codingPath: [any CodingKey]) {
        self.items = items
        self.codingPath = codingPath
    }

    private mutating func next(_ type: Any.Type) throws -> CompactNode {
        guard currentIndex < items.count else {
            throw DecodingError.valueNotFound(type, .init(codingPath: codingPath, debugDescription: "no more items"))
        }
        defer { currentIndex += 1 }
        return items[currentIndex]
    }

    mutating func decodeNil() throws -> Bool {
        guard currentIndex < items.count else { throw DecodingError.valueNotFound(Never.self, .init(codingPath: codingPath, debugDescription: "no more items")) }
        if case .null = items[currentIndex] {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try CompactScalar.bool(next(type), codingPath) }
    mutating func decode(_ type: String.Type) throws -> String { try CompactScalar.string(next(type), codingPath) }
    mutating func decode(_ type: Double.Type) throws -> Double { try CompactScalar.double(next(type), codingPath) }
    mutating func decode(_ type: Float.Type) throws -> Float { Float(try CompactScalar.double(next(type), codingPath)) }
    mutating func decode(_ type: Int.Type) throws -> Int { try CompactScalar.integer(type, next(type), codingPath) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try CompactScalar.integer(type, next(type), codingPath) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try CompactScalar.integer(type, next(type), codingPath) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try CompactScalar.integer(type, next(type), codingPath) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try CompactScalar.integer(type, next(type), codingPath) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try CompactScalar.integer(type, next(type), codingPath) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try CompactScalar.integer(type, next(type), codingPath) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try CompactScalar.integer(type, next(type), codingPath) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try CompactScalar.integer(type, next(type), codingPath) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try CompactScalar.integer(type, next(type), codingPath) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try CompactDecoding.value(type, from: next(type), codingPath: codingPath)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try CompactDecoding(node: next([String: Any].self), codingPath: codingPath).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try CompactDecoding(node: next([Any].self), codingPath: codingPath).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        CompactDecoding(node: try next(Any.self), codingPath: codingPath)
    }
}

struct CompactSingleValueDecoding: SingleValueDecodingContainer {
    let node: CompactNode
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool {
        if case .null = node { return true }
        return false
    }

    func decode(_ type: Bool.Type) throws -> Bool { try CompactScalar.bool(node, codingPath) }
    func decode(_ type: String.Type) throws -> String { try CompactScalar.string(node, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try CompactScalar.double(node, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { Float(try CompactScalar.double(node, codingPath)) }
    func decode(_ type: Int.Type) throws -> Int { try CompactScalar.integer(type, node, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try CompactScalar.integer(type, node, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try CompactScalar.integer(type, node, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try CompactScalar.integer(type, node, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try CompactScalar.integer(type, node, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try CompactScalar.integer(type, node, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try CompactScalar.integer(type, node, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try CompactScalar.integer(type, node, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try CompactScalar.integer(type, node, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try CompactScalar.integer(type, node, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try CompactDecoding.value(type, from: node, codingPath: codingPath) }
}
