import CLogbook

/// The type tag of an argument as stored on disk (`lb_arg_type`).
public enum LogArgumentType: UInt8, Sendable, CaseIterable {
    case bool = 1, int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint
    case float, double, string, staticString, bytes

    /// The name used in JSON output (`"type"`).
    public var name: String {
        switch self {
        case .bool: "bool"
        case .int8: "int8"
        case .int16: "int16"
        case .int32: "int32"
        case .int64: "int64"
        case .int: "int"
        case .uint8: "uint8"
        case .uint16: "uint16"
        case .uint32: "uint32"
        case .uint64: "uint64"
        case .uint: "uint"
        case .float: "float"
        case .double: "double"
        case .string: "string"
        case .staticString: "static_string"
        case .bytes: "bytes"
        }
    }
}

/// A value that can be interpolated into a ``LogMessage`` and is stored in binary form.
///
/// Logbook's own conformances cover Bool, the fixed-width integers, Int, UInt, Float, Double,
/// String, Substring, StaticString and byte arrays. For your own types, conform to
/// ``LogArgumentConvertible`` instead.
public protocol LogArgument {
    /// The on-disk type of this value.
    static var logArgumentType: LogArgumentType { get }
    /// Appends the value to the record being built. Called only by Logbook.
    func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>)
}

/// A type that logs itself as one of the ``LogArgument`` types.
///
/// ```swift
/// extension UserID: LogArgumentConvertible {
///     var logArgument: UInt64 { rawValue }
/// }
/// ```
public protocol LogArgumentConvertible {
    associatedtype Argument: LogArgument
    var logArgument: Argument { get }
}

extension Bool: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .bool }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_bool(writer, self)
    }
}

extension Int8: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .int8 }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_i8(writer, self)
    }
}

extension Int16: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .int16 }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_i16(writer, self)
    }
}

extension Int32: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .int32 }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_i32(writer, self)
    }
}

extension Int64: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .int64 }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_i64(writer, self)
    }
}

extension Int: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .int }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_int(writer, Int64(self))
    }
}

extension UInt8: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .uint8 }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_u8(writer, self)
    }
}

extension UInt16: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .uint16 }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_u16(writer, self)
    }
}

extension UInt32: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .uint32 }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_u32(writer, self)
    }
}

extension UInt64: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .uint64 }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_u64(writer, self)
    }
}

extension UInt: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .uint }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_uint(writer, UInt64(self))
    }
}

extension Float: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .float }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_f32(writer, self)
    }
}

extension Double: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .double }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_f64(writer, self)
    }
}

extension String: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .string }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        var text = self
        text.withUTF8 { bytes in
            lb_record_put_data(writer, LogArgumentType.string.rawValue, bytes.baseAddress, bytes.count)
        }
    }
}

extension Substring: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .string }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        var text = self
        text.withUTF8 { bytes in
            lb_record_put_data(writer, LogArgumentType.string.rawValue, bytes.baseAddress, bytes.count)
        }
    }
}

extension StaticString: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .staticString }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        withUTF8Buffer { bytes in
            lb_record_put_data(writer, LogArgumentType.staticString.rawValue, bytes.baseAddress, bytes.count)
        }
    }
}

extension Array: LogArgument where Element == UInt8 {
    @inlinable public static var logArgumentType: LogArgumentType { .bytes }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        withUnsafeBytes { bytes in
            lb_record_put_data(writer, LogArgumentType.bytes.rawValue, bytes.baseAddress, bytes.count)
        }
    }
}

extension ArraySlice: LogArgument where Element == UInt8 {
    @inlinable public static var logArgumentType: LogArgumentType { .bytes }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        withUnsafeBytes { bytes in
            lb_record_put_data(writer, LogArgumentType.bytes.rawValue, bytes.baseAddress, bytes.count)
        }
    }
}

extension UnsafeRawBufferPointer: LogArgument {
    @inlinable public static var logArgumentType: LogArgumentType { .bytes }
    @inlinable public func writeLogArgument(to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_data(writer, LogArgumentType.bytes.rawValue, baseAddress, count)
    }
}
