import CLogbook
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A named logger of a ``LogBundle``. Cheap to copy; every copy shares one runtime level control.
///
/// A call whose level is below the logger's minimum costs about a nanosecond and does not evaluate
/// its message. Call sites are identified by `#fileID`, `#line` and `#column`: the constant text of
/// the message is stored once per site, each record holds only the typed argument values.
public struct Logger: @unchecked Sendable {
    /// The bundle this logger writes to; `nil` for a category logger used before
    /// ``LogBundle/bootstrap(_:)``, which records nothing.
    public let bundle: LogBundle?
    @usableFromInline let control: UnsafeMutablePointer<lb_logger>

    /// Metadata written with every record of this logger, before a call's own (`metadata:`; a key
    /// in both keeps the call's value): a request's id, a user. A value, as swift-log's loggers:
    /// a copy given more metadata (``with(metadata:)``, `logger[metadataKey:]`) leaves the original
    /// as it was, so each request handler gets its own at no cost to the others. Stored in the
    /// same form as `metadata:` (one METADATA part per record, logbook_format.h).
    public var metadata = LogMetadata()

    /// The value of one key of ``metadata``; setting `nil` removes the key.
    public subscript(metadataKey key: String) -> LogMetadataValue? {
        get { metadata[key] }
        set {
            var pairs = metadata.pairs
            pairs.removeAll { $0.key == key }
            if let newValue { pairs.append(LogMetadata.Pair(key: key, value: newValue)) }
            metadata = LogMetadata(pairs)
        }
    }

    /// A copy of this logger that writes `more` with every record too (a key already there takes
    /// the new value):
    ///
    /// ```swift
    /// let requestLog = log.with(metadata: ["request_id": "\(id)", "user": "\(user)"])
    /// requestLog.info("GET /items took \(ms) ms")   // the request id and user are stored with it
    /// ```
    public func with(metadata more: LogMetadata) -> Logger {
        var copy = self
        copy.metadata = LogMetadata(metadata.pairs + more.pairs)
        return copy
    }

    /// The logger's metadata and a call's, as one METADATA part: the call's values win. Out of
    /// line: a logger without metadata (the common case) never comes here, and its call's literal
    /// stays where the compiler put it.
    @usableFromInline @inline(never)
    func writeMetadata(merging call: LogMetadata, to writer: UnsafeMutablePointer<lb_writer>) {
        if call.isEmpty {
            metadata.writePairs(to: writer)
        } else {
            LogMetadata(metadata.pairs + call.pairs).writePairs(to: writer)
        }
    }

    init(bundle: LogBundle, control: UnsafeMutablePointer<lb_logger>) {
        self.bundle = bundle
        self.control = control
    }

    private init(detached control: UnsafeMutablePointer<lb_logger>) {
        self.bundle = nil
        self.control = control
    }

    /// A logger of no bundle: always off (setting its level does nothing).
    @_spi(LogbookBackend) public static let detached: Logger = {
        let control = UnsafeMutablePointer<lb_logger>.allocate(capacity: 1)
        control.initialize(to: lb_logger())
        control.pointee.name = UnsafePointer(strdup("(no bundle)"))
        lb_logger_set_min_level(control, UInt8(LB_LEVEL_OFF.rawValue))
        return Logger(detached: control)
    }()

    /// The C logger behind this one, for C code in the same program (`LB_INFO(logger, ...)`).
    @inlinable public var cLogger: UnsafeMutablePointer<lb_logger> { control }

    /// The logger's name.
    public var name: String { String(cString: control.pointee.name) }

    /// The least severe level that is recorded, or `nil` when the logger is switched off.
    /// Changes take effect at once in every thread.
    ///
    /// Setting it sets the bundle's filter rule for this name (``LogBundle/setLevel(_:for:)``), so
    /// loggers below it in the dot hierarchy (`name.child`) follow unless they have their own rule,
    /// and a later change of the whole ``LogBundle/filter`` replaces it.
    public var minimumLevel: LogLevel? {
        get { LogLevel(rawValue: lb_logger_min_level(control)) }
        nonmutating set { bundle?.setLevel(newValue, for: name) }
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

    // MARK: With metadata or an error

    /// Logs `message` with structured `metadata` and/or an `error`, stored typed after the message's
    /// arguments (logbook_format.h: METADATA, ERROR) and shown by the reader, `logbook show` and
    /// its JSON:
    ///
    /// ```swift
    /// log.info("request done in \(ms) ms", metadata: ["path": "\(path)", "status": 200])
    /// log.error("fetch failed", error: error)
    /// log.warning("login failed", metadata: ["user": .private(user)])  // only its type is stored
    /// ```
    ///
    /// A filtered-out call evaluates neither the message nor the metadata. Calls without either
    /// argument take the plain overloads above, whose path is unchanged.
    @inlinable @inline(__always) @_disfavoredOverload
    public func log(
        _ level: LogLevel, _ message: @autoclosure () -> LogMessage,
        metadata: @autoclosure () -> LogMetadata = [:], error: (any Error)? = nil,
        file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, level.rawValue) else { return }
        write(level, message, metadata: metadata, error: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always) @_disfavoredOverload
    public func trace(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: (any Error)? = nil, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.trace.rawValue) else { return }
        write(.trace, message, metadata: metadata, error: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always) @_disfavoredOverload
    public func debug(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: (any Error)? = nil, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.debug.rawValue) else { return }
        write(.debug, message, metadata: metadata, error: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always) @_disfavoredOverload
    public func info(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: (any Error)? = nil, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.info.rawValue) else { return }
        write(.info, message, metadata: metadata, error: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always) @_disfavoredOverload
    public func notice(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: (any Error)? = nil, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.notice.rawValue) else { return }
        write(.notice, message, metadata: metadata, error: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always) @_disfavoredOverload
    public func warning(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: (any Error)? = nil, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.warning.rawValue) else { return }
        write(.warning, message, metadata: metadata, error: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always) @_disfavoredOverload
    public func error(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: (any Error)? = nil, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.error.rawValue) else { return }
        write(.error, message, metadata: metadata, error: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always) @_disfavoredOverload
    public func critical(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: (any Error)? = nil, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.critical.rawValue) else { return }
        write(.critical, message, metadata: metadata, error: error, file: file, function: function, line: line, column: column)
    }

    // An error of a concrete type (`error: Timeout()`, or an `any Error` opened to its type) is
    // described where it is: these overloads spare the `any Error` box (an allocation) that the
    // ones above take.

    @inlinable @inline(__always)
    public func log(
        _ level: LogLevel, _ message: @autoclosure () -> LogMessage,
        metadata: @autoclosure () -> LogMetadata = [:], error: some Error,
        file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, level.rawValue) else { return }
        write(level, message, metadata: metadata, typedError: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always)
    public func trace(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: some Error, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.trace.rawValue) else { return }
        write(.trace, message, metadata: metadata, typedError: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always)
    public func debug(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: some Error, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.debug.rawValue) else { return }
        write(.debug, message, metadata: metadata, typedError: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always)
    public func info(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: some Error, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.info.rawValue) else { return }
        write(.info, message, metadata: metadata, typedError: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always)
    public func notice(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: some Error, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.notice.rawValue) else { return }
        write(.notice, message, metadata: metadata, typedError: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always)
    public func warning(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: some Error, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.warning.rawValue) else { return }
        write(.warning, message, metadata: metadata, typedError: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always)
    public func error(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: some Error, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.error.rawValue) else { return }
        write(.error, message, metadata: metadata, typedError: error, file: file, function: function, line: line, column: column)
    }

    @inlinable @inline(__always)
    public func critical(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> LogMetadata = [:],
        error: some Error, file: StaticString = #fileID, function: StaticString = #function,
        line: UInt = #line, column: UInt = #column
    ) {
        guard lb_logger_enabled(control, LogLevel.critical.rawValue) else { return }
        write(.critical, message, metadata: metadata, typedError: error, file: file, function: function, line: line, column: column)
    }

    /// The enabled path of a call with an error of a concrete type.
    @inlinable @inline(__always)
    func write<E: Error>(
        _ level: LogLevel, _ message: () -> LogMessage, metadata: () -> LogMetadata, typedError error: E,
        file: StaticString, function: StaticString, line: UInt, column: UInt
    ) {
        write(level, message, metadata: metadata, file: file, function: function, line: line, column: column) {
            LoggedError.writeTypedError(error, to: $0)
        }
    }

    @inlinable @inline(__always)
    func write(
        _ level: LogLevel, _ message: () -> LogMessage, metadata: () -> LogMetadata, error: (any Error)?,
        file: StaticString, function: StaticString, line: UInt, column: UInt
    ) {
        write(level, message, metadata: metadata, file: file, function: function, line: line, column: column) {
            if let error { LoggedError.writeError(error, to: $0) }
        }
    }

    /// The enabled path of a call with metadata or an error: the message's arguments, then the tail
    /// (metadata, then the error). Inlined into the call, like the plain path: the metadata literal
    /// is built, written and released in one function, so its array lives on the stack and the call
    /// allocates nothing.
    @inlinable @inline(__always)
    func write(
        _ level: LogLevel, _ message: () -> LogMessage, metadata: () -> LogMetadata,
        file: StaticString, function: StaticString, line: UInt, column: UInt,
        writeError: (UnsafeMutablePointer<lb_writer>) -> Void
    ) {
        let bundle = control.pointee.bundle!
        let writer = lb_writer_get(bundle)!
        lb_record_begin(writer, control.pointee.id, level.rawValue)
        let site = lb_site_lookup(
            bundle, file.utf8Start, nil, UInt32(truncatingIfNeeded: line), UInt32(truncatingIfNeeded: column))
        if _fastPath(site != 0) {
            _ = message()
            if _fastPath(self.metadata.isEmpty) {
                let pairs = metadata()
                if !pairs.isEmpty { pairs.writePairs(to: writer) }
            } else {
                writeMetadata(merging: metadata(), to: writer)
            }
            writeError(writer)
            lb_record_commit(writer, site)
        } else {
            writeFirstAtSite(writer, message, tail: { writer in
                if self.metadata.isEmpty {
                    let pairs = metadata()
                    if !pairs.isEmpty { pairs.writePairs(to: writer) }
                } else {
                    writeMetadata(merging: metadata(), to: writer)
                }
                writeError(writer)
            }, file: file, function: function, line: line, column: column)
        }
    }

    /// The enabled path: begin a record in this thread's chunk, let the message's interpolation
    /// write the typed values straight into it, then commit it with its call site.
    @inlinable @inline(__always)
    func write(
        _ level: LogLevel, _ message: () -> LogMessage, file: StaticString, function: StaticString,
        line: UInt, column: UInt
    ) {
        let bundle = control.pointee.bundle!
        let writer = lb_writer_get(bundle)!
        lb_record_begin(writer, control.pointee.id, level.rawValue)
        let site = lb_site_lookup(
            bundle, file.utf8Start, nil, UInt32(truncatingIfNeeded: line), UInt32(truncatingIfNeeded: column))
        if _fastPath(site != 0) {
            _ = message()
            if _slowPath(!metadata.isEmpty) { writeMetadata(merging: LogMetadata(), to: writer) }
            lb_record_commit(writer, site)
        } else {
            writeFirstAtSite(writer, message, tail: { writer in
                if !metadata.isEmpty { writeMetadata(merging: LogMetadata(), to: writer) }
            }, file: file, function: function, line: line, column: column)
        }
    }

    /// First record of a call site in this bundle: capture the literal text while the message is
    /// built, register the site, then commit.
    @usableFromInline @inline(never)
    func writeFirstAtSite(
        _ writer: UnsafeMutablePointer<lb_writer>, _ message: () -> LogMessage,
        tail: (UnsafeMutablePointer<lb_writer>) -> Void = { _ in }, file: StaticString,
        function: StaticString, line: UInt, column: UInt
    ) {
        let capture = SiteCapture()
        let previous = writer.pointee.capture
        writer.pointee.capture = Unmanaged.passUnretained(capture).toOpaque()
        _ = message()
        writer.pointee.capture = previous
        tail(writer)
        let text = { (string: StaticString) in string.withUTF8Buffer { String(decoding: $0, as: UTF8.self) } }
        let site = registerSite(
            control.pointee.bundle, keyFile: UnsafeRawPointer(file.utf8Start), keyExtra: nil,
            line: UInt32(truncatingIfNeeded: line), column: UInt32(truncatingIfNeeded: column),
            file: text(file), function: text(function), template: capture.template, source: moduleName(fileID: text(file)))
        if site == 0 { lb_record_discard(writer, UInt32(LB_DROP_META.rawValue)) }
        lb_record_commit(writer, site)
    }
}

/// Registers a call site in the bundle's meta file (once per site: the slow path of a first log
/// call) and returns its id, or 0 when the entry could not be written. The key identifies the
/// site in the lock-free site cache (see `lb_site_desc`).
@_spi(LogbookBackend)
public func registerSite(
    _ bundle: OpaquePointer, keyFile: UnsafeRawPointer?, keyExtra: UnsafeRawPointer?, line: UInt32, column: UInt32,
    file: String, function: String, template: String, source: String
) -> UInt32 {
    var site: UInt32 = 0
    let result = file.withCString { filePointer in
        function.withCString { functionPointer in
            template.withCString { templatePointer in
                source.withCString { sourcePointer in
                    var desc = lb_site_desc()
                    desc.key_file = keyFile
                    desc.key_extra = keyExtra
                    desc.line = line
                    desc.column = column
                    desc.file = filePointer
                    desc.file_length = file.utf8.count
                    desc.function = functionPointer
                    desc.function_length = function.utf8.count
                    desc.template_text = templatePointer
                    desc.template_length = template.utf8.count
                    desc.source = sourcePointer
                    desc.source_length = source.utf8.count
                    return lb_site_register(bundle, &desc, &site)
                }
            }
        }
    }
    return result == 0 ? site : 0
}

/// The module of a `#fileID` ("MyApp/Net.swift" -> "MyApp"); empty for other paths.
func moduleName(fileID text: String) -> String {
    guard let slash = text.firstIndex(of: "/"), !text.hasPrefix("/") else { return "" }
    return String(text[..<slash])
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
