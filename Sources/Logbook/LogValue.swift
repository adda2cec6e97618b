import CLogbook

/// One typed argument of a recorded entry.
public enum LogValue: Equatable, Sendable, CustomStringConvertible {
    case bool(Bool)
    case signed(Int64, LogArgumentType)
    case unsigned(UInt64, LogArgumentType)
    case float(Float)
    case double(Double)
    case string(String, isStatic: Bool)
    case bytes([UInt8])
    /// A value logged with `privacy: .private`: only its type was recorded.
    case redacted(LogArgumentType)

    /// The stored type of the value.
    public var type: LogArgumentType {
        switch self {
        case .bool: .bool
        case .signed(_, let type), .unsigned(_, let type), .redacted(let type): type
        case .float: .float
        case .double: .double
        case .string(_, let isStatic): isStatic ? .staticString : .string
        case .bytes: .bytes
        }
    }

    /// The value as shown in a rendered message.
    public var description: String {
        switch self {
        case .bool(let value): value ? "true" : "false"
        case .signed(let value, _): String(value)
        case .unsigned(let value, _): String(value)
        case .float(let value): value.description
        case .double(let value): value.description
        case .string(let value, _): value
        case .bytes(let value): "<" + value.map { hexByte($0) }.joined() + ">"
        case .redacted: "<private>"
        }
    }

    /// The value as a JSON value: numbers and booleans as such (non-finite floats as strings),
    /// strings escaped, bytes as a hex string, a redacted value as null.
    public var jsonValue: String {
        switch self {
        case .bool(let value): value ? "true" : "false"
        case .signed(let value, _): String(value)
        case .unsigned(let value, _): String(value)
        case .float(let value): value.isFinite ? value.description : "\"\(value)\""
        case .double(let value): value.isFinite ? value.description : "\"\(value)\""
        case .string(let value, _): "\"" + escapingJSON(value) + "\""
        case .bytes(let value): "\"" + value.map(hexByte).joined() + "\""
        case .redacted: "null"
        }
    }

    init?(_ arg: lb_arg) {
        guard let type = LogArgumentType(rawValue: arg.type) else {
            if arg.type == UInt8(LB_ARG_REDACTED.rawValue), let hidden = LogArgumentType(rawValue: arg.redacted_type) {
                self = .redacted(hidden)
                return
            }
            return nil
        }
        switch type {
        case .bool: self = .bool(arg.value.b)
        case .int8, .int16, .int32, .int64, .int: self = .signed(arg.value.i, type)
        case .uint8, .uint16, .uint32, .uint64, .uint: self = .unsigned(arg.value.u, type)
        case .float: self = .float(Float(arg.value.f))
        case .double: self = .double(arg.value.f)
        case .string, .staticString:
            let buffer = UnsafeBufferPointer(start: arg.bytes, count: Int(arg.length))
            self = .string(String(decoding: buffer, as: UTF8.self), isStatic: type == .staticString)
        case .bytes:
            self = .bytes(Array(UnsafeBufferPointer(start: arg.bytes, count: Int(arg.length))))
        }
    }
}

func hexByte(_ byte: UInt8) -> String {
    let digits: [Character] = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
}

/// A site template ("took {} ms", "{{" for a literal brace) split once into the literal text
/// around its placeholders.
struct TemplateSegments: Sendable {
    /// `literals.count == placeholders + 1`.
    let literals: [String]

    init(_ template: String) {
        var literals: [String] = []
        var current: [UInt8] = []
        let bytes = Array(template.utf8)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "{"), index + 1 < bytes.count {
                let next = bytes[index + 1]
                if next == UInt8(ascii: "{") {
                    current.append(byte)
                    index += 2
                    continue
                }
                if next == UInt8(ascii: "}") {
                    literals.append(String(decoding: current, as: UTF8.self))
                    current.removeAll(keepingCapacity: true)
                    index += 2
                    continue
                }
            }
            current.append(byte)
            index += 1
        }
        literals.append(String(decoding: current, as: UTF8.self))
        self.literals = literals
    }
}

/// Renders a site template ("took {} ms", "{{" for a literal brace) with argument texts.
/// Arguments without a placeholder are appended; placeholders without an argument stay "{}".
public func renderTemplate(_ template: String, _ arguments: [String]) -> String {
    var renderer = LineRenderer(capacity: 128)
    renderer.appendMessage(TemplateSegments(template), arguments.map { .string($0, isStatic: false) }, .none)
    return String(decoding: renderer.bytes, as: UTF8.self)
}
