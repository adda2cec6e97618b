import CLogbook

/// A named logger of a ``LogBundle``. Cheap to copy; every copy shares one runtime level control.
///
/// A call whose level is below the logger's minimum costs about a nanosecond and does not evaluate
/// its message. Call sites are identified by `#fileID`, `#line` and `#column`: the constant text of
/// the message is stored once per site, each record holds only the typed argument values.
public struct Logger: @unchecked Sendable {
    /// The bundle this logger writes to.
    public let bundle: LogBundle
    @usableFromInline let control: UnsafeMutablePointer<lb_logger>

    init(bundle: LogBundle, control: UnsafeMutablePointer<lb_logger>) {
        self.bundle = bundle
        self.control = control
    }

    /// The C logger behind this one, for C code in the same program (`LB_INFO(logger, ...)`).
    public var cLogger: UnsafeMutablePointer<lb_logger> { control }

    /// The logger's name.
    public var name: String { String(cString: control.pointee.name) }

    /// The least severe level that is recorded, or `nil` when the logger is switched off.
    /// Changes take effect at once in every thread.
    public var minimumLevel: LogLevel? {
        get { LogLevel(rawValue: lb_logger_min_level(control)) }
        nonmutating set { lb_logger_set_min_level(control, newValue?.rawValue ?? UInt8(LB_LEVEL_OFF.rawValue)) }
    }

    /// Switches the logger on (`minimumLevel = .trace` if it was off) or off.
    public var isEnabled: Bool {
        get { minimumLevel != nil }
        nonmutating set { minimumLevel = newValue ? (minimumLevel ?? .trace) : nil }
    }

    /// Whether a message at `level` would be recorded.
    @inlinable
    public func isEnabled(_ level: LogLevel) -> Bool { lb_logger_enabled(control, level.rawValue) }

    @inlinable
    public func log(
        _ level: LogLevel, _ message: @autoclosure () -> LogMessage,
        file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, level.rawValue) else { return }
        write(level, message, file: file, function: function, line: line, column: column)
    }

    @inlinable
    public func trace(
        _ message: @autoclosure () -> LogMessage, file: StaticString = #fileID,
        function: StaticString = #function, line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.trace.rawValue) else { return }
        write(.trace, message, file: file, function: function, line: line, column: column)
    }

    @inlinable
    public func debug(
        _ message: @autoclosure () -> LogMessage, file: StaticString = #fileID,
        function: StaticString = #function, line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.debug.rawValue) else { return }
        write(.debug, message, file: file, function: function, line: line, column: column)
    }

    @inlinable
    public func info(
        _ message: @autoclosure () -> LogMessage, file: StaticString = #fileID,
        function: StaticString = #function, line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.info.rawValue) else { return }
        write(.info, message, file: file, function: function, line: line, column: column)
    }

    @inlinable
    public func notice(
        _ message: @autoclosure () -> LogMessage, file: StaticString = #fileID,
        function: StaticString = #function, line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.notice.rawValue) else { return }
        write(.notice, message, file: file, function: function, line: line, column: column)
    }

    @inlinable
    public func warning(
        _ message: @autoclosure () -> LogMessage, file: StaticString = #fileID,
        function: StaticString = #function, line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.warning.rawValue) else { return }
        write(.warning, message, file: file, function: function, line: line, column: column)
    }

    @inlinable
    public func error(
        _ message: @autoclosure () -> LogMessage, file: StaticString = #fileID,
        function: StaticString = #function, line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.error.rawValue) else { return }
        write(.error, message, file: file, function: function, line: line, column: column)
    }

    @inlinable
    public func critical(
        _ message: @autoclosure () -> LogMessage, file: StaticString = #fileID,
        function: StaticString = #function, line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.critical.rawValue) else { return }
        write(.critical, message, file: file, function: function, line: line, column: column)
    }

    /// The enabled path: begin a record in this thread's chunk, let the message's interpolation
    /// write the typed values straight into it, then commit it with its call site.
    @inlinable @inline(__always)
    func write(
        _ level: LogLevel, _ message: () -> LogMessage, file: StaticString, function: StaticString,
        line: UInt, column: UInt
    ) {
        let bundle = bundle.raw
        let writer = lb_writer_get(bundle)!
        lb_record_begin(writer, control.pointee.id, level.rawValue)
        let site = lb_site_lookup(
            bundle, file.utf8Start, nil, UInt32(truncatingIfNeeded: line), UInt32(truncatingIfNeeded: column))
        if _fastPath(site != 0) {
            _ = message()
            lb_record_commit(writer, site)
        } else {
            writeFirstAtSite(writer, message, file: file, function: function, line: line, column: column)
        }
    }

    /// First record of a call site in this bundle: capture the literal text while the message is
    /// built, register the site, then commit.
    @usableFromInline @inline(never)
    func writeFirstAtSite(
        _ writer: UnsafeMutablePointer<lb_writer>, _ message: () -> LogMessage, file: StaticString,
        function: StaticString, line: UInt, column: UInt
    ) {
        let capture = SiteCapture()
        let previous = writer.pointee.capture
        writer.pointee.capture = Unmanaged.passUnretained(capture).toOpaque()
        _ = message()
        writer.pointee.capture = previous
        var site: UInt32 = 0
        let template = capture.template
        let result: Int32 = template.withCString { templatePointer in
            function.withUTF8Buffer { functionBytes in
                file.withUTF8Buffer { fileBytes in
                    var desc = lb_site_desc()
                    desc.key_file = UnsafeRawPointer(file.utf8Start)
                    desc.key_extra = nil
                    desc.line = UInt32(truncatingIfNeeded: line)
                    desc.column = UInt32(truncatingIfNeeded: column)
                    desc.file = UnsafeRawPointer(fileBytes.baseAddress)?.assumingMemoryBound(to: CChar.self)
                    desc.file_length = fileBytes.count
                    desc.function = UnsafeRawPointer(functionBytes.baseAddress)?.assumingMemoryBound(to: CChar.self)
                    desc.function_length = functionBytes.count
                    desc.template_text = templatePointer
                    desc.template_length = template.utf8.count
                    return lb_site_register(bundle.raw, &desc, &site)
                }
            }
        }
        if result != 0 { lb_record_discard(writer, UInt32(LB_DROP_META.rawValue)) }
        lb_record_commit(writer, site)
    }
}

/// Collects a new call site's template while its first message is built.
@usableFromInline
final class SiteCapture {
    var template = ""

    @usableFromInline
    static func from(_ pointer: UnsafeMutableRawPointer) -> SiteCapture {
        Unmanaged<SiteCapture>.fromOpaque(pointer).takeUnretainedValue()
    }

    @usableFromInline
    func appendLiteral(_ literal: StaticString) {
        let text = literal.withUTF8Buffer { String(decoding: $0, as: UTF8.self) }
        for character in text {
            template.append(character)
            if character == "{" { template.append("{") }  // "{{" is a literal brace
        }
    }

    @usableFromInline
    func appendArgument() { template.append("{}") }
}
