import CLogbook

/// Whether an interpolated value may reach the disk. A metadata value is withheld the same way:
/// `metadata: ["user": .private(user)]` (`LogMetadataValue.private(_:)`) or
/// `"\(user, privacy: .private)"`.
public enum LogPrivacy: Sendable {
    /// The value is recorded.
    case `public`
    /// Only the value's type is recorded; the reader shows `<private>`.
    case `private`
}

/// The message of a log call, written by string interpolation:
/// `log.info("request \(id) took \(ms) ms ok=\(ok)")`.
///
/// Interpolated values are typed: the ``LogArgument`` types (Bool, the integers, Float, Double,
/// String, Substring, StaticString, byte arrays) and types that conform to
/// ``LogArgumentConvertible``. Any other value is a compile error that says to log it with
/// `\(describing: value)` (its description, as a string) or to conform its type.
///
/// A `LogMessage` carries nothing itself: while the logger builds a record, the interpolation
/// writes each value's binary form straight into the record, and the constant text is stored once
/// per call site. So a message only has content inside a log call; build it there, in the call's
/// argument, not beforehand.
public struct LogMessage: ExpressibleByStringInterpolation, Sendable {
    @inlinable
    public init(stringLiteral value: StaticString) {
        if let writer = lb_writer_building(), let capture = writer.pointee.capture {
            SiteCapture.from(capture).appendLiteral(value)
        }
    }

    @inlinable
    public init(stringInterpolation: StringInterpolation) {}

    public struct StringInterpolation: StringInterpolationProtocol {
        public typealias StringLiteralType = StaticString

        /// The writer of the record being built, or nil outside a log call.
        @usableFromInline let writer: UnsafeMutablePointer<lb_writer>?
        /// Non-nil only for the first record of a call site.
        @usableFromInline let capture: UnsafeMutableRawPointer?

        @inlinable
        public init(literalCapacity: Int, interpolationCount: Int) {
            let writer = lb_writer_building()
            self.writer = writer
            self.capture = writer?.pointee.capture
        }

        @inlinable
        public mutating func appendLiteral(_ literal: StaticString) {
            if let capture { SiteCapture.from(capture).appendLiteral(literal) }
        }

        @inlinable
        public mutating func appendInterpolation<Value: LogArgument>(_ value: Value) {
            guard let writer else { return }
            if let capture { SiteCapture.from(capture).appendArgument() }
            value.writeLogArgument(to: writer)
        }

        @inlinable
        public mutating func appendInterpolation<Value: LogArgument>(_ value: Value, privacy: LogPrivacy) {
            guard let writer else { return }
            if let capture { SiteCapture.from(capture).appendArgument() }
            switch privacy {
            case .public: value.writeLogArgument(to: writer)
            case .private: lb_record_put_redacted(writer, Value.logArgumentType.rawValue)
            }
        }

        @inlinable
        public mutating func appendInterpolation<Value: LogArgumentConvertible>(_ value: Value) {
            appendInterpolation(value.logArgument)
        }

        @inlinable
        public mutating func appendInterpolation<Value: LogArgumentConvertible>(
            _ value: Value, privacy: LogPrivacy
        ) {
            appendInterpolation(value.logArgument, privacy: privacy)
        }

        /// Any value by its `description` (costs a String conversion; prefer typed values).
        @inlinable
        public mutating func appendInterpolation<Value>(describing value: Value, privacy: LogPrivacy = .public) {
            guard writer != nil else { return }
            appendInterpolation(String(describing: value), privacy: privacy)
        }

        // Any other type: a compile error that says what to do, rather than "no exact matches in
        // call to 'appendInterpolation'". The compiler takes an unavailable overload only when no
        // available one fits, and an unconstrained generic is less specific than each one above,
        // so every supported type still takes its own overload.

        /// Not a typed value: log it with `\(describing: value)`, or conform its type to
        /// ``LogArgumentConvertible``.
        @available(*, unavailable, message: "Logbook logs typed values: use \\(describing: value) for any other type, or conform it to LogArgumentConvertible")
        public mutating func appendInterpolation<Value>(_ value: Value) { fatalError("unavailable") }

        /// Not a typed value: log it with `\(describing: value, privacy: .private)`, or conform
        /// its type to ``LogArgumentConvertible``.
        @available(*, unavailable, message: "Logbook logs typed values: use \\(describing: value, privacy: ...) for any other type, or conform it to LogArgumentConvertible")
        public mutating func appendInterpolation<Value>(_ value: Value, privacy: LogPrivacy) { fatalError("unavailable") }

        /// An optional: unwrap it (`\(count ?? 0)`), or log its description with
        /// `\(describing: value)`.
        @available(*, unavailable, message: "Logbook logs typed values: unwrap the optional (\\(value ?? fallback), with a fallback of its type), or use \\(describing: value)")
        public mutating func appendInterpolation<Value: LogArgument>(_ value: Value?) { fatalError("unavailable") }

        @available(*, unavailable, message: "Logbook logs typed values: unwrap the optional (\\(value ?? fallback, privacy: ...), with a fallback of its type), or use \\(describing: value, privacy: ...)")
        public mutating func appendInterpolation<Value: LogArgument>(_ value: Value?, privacy: LogPrivacy) { fatalError("unavailable") }
    }
}
