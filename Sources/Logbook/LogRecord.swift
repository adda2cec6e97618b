import CLogbook

/// One entry handed out by ``LogReader/stream(where:_:)``, borrowed from the reader: it is valid
/// only while the closure that received it runs. Reading its fields decodes nothing and allocates
/// nothing; ``entry`` makes a ``LogEntry`` that outlives the call.
public struct LogRecord {
    @usableFromInline let raw: UnsafePointer<lb_entry>
    @usableFromInline unowned(unsafe) let reader: LogReader

    @inlinable init(_ raw: UnsafePointer<lb_entry>, _ reader: LogReader) {
        self.raw = raw
        self.reader = reader
    }

    /// The record as the C reader handed it out, and that reader (for the query engine).
    package var rawEntry: UnsafePointer<lb_entry> { raw }
    package var rawReader: OpaquePointer { reader.raw }
    package var logReader: LogReader { reader }
    package init(borrowing raw: UnsafePointer<lb_entry>, of reader: LogReader) { self.init(raw, reader) }

    /// Nanoseconds since the Unix epoch (UTC).
    @inlinable public var wallNanoseconds: Int64 { raw.pointee.wall_ns }
    @inlinable public var rawLevel: UInt8 { raw.pointee.level }
    /// `nil` for a level this version does not know.
    @inlinable public var level: LogLevel? { LogLevel(rawValue: raw.pointee.level) }
    @inlinable public var threadID: UInt32 { raw.pointee.thread_id }
    @inlinable public var processID: UInt32 { raw.pointee.pid }
    @inlinable public var chunkSequence: UInt64 { raw.pointee.chunk_sequence }
    @inlinable public var chunkOffset: UInt32 { raw.pointee.chunk_offset }
    /// The bytes of its encoded arguments and metadata (what ``entry`` decodes: a measure of
    /// how much memory that takes).
    @inlinable public var argumentBytes: Int { Int(raw.pointee.args_length) }
    /// The logger's name (made once per logger by the reader), `nil` when its meta entry was lost.
    public var logger: String? { reader.loggerName(raw.pointee.session, raw.pointee.logger_id) }
    /// The call site's template, `nil` when its meta entry was lost.
    public var template: String? { site?.template }
    public var file: String? { site?.file }
    public var line: UInt32 { site?.line ?? 0 }
    public var function: String? { site?.function }

    var site: LogEntry.Site? { reader.site(raw.pointee.session, raw.pointee.site_id) }

    /// The whole entry, decoded: arguments, metadata and error included.
    public var entry: LogEntry { reader.decode(raw.pointee) }

    /// The message as `logbook show` prints it.
    public var message: String { entry.message }

    /// A numeric argument of the message.
    public enum Number: Sendable, Equatable {
        case signed(Int64)
        case unsigned(UInt64)
        case floatingPoint(Double)

        /// The value as a `Double` (exact below 2^53).
        public var doubleValue: Double {
            switch self {
            case .signed(let value): Double(value)
            case .unsigned(let value): Double(value)
            case .floatingPoint(let value): value
            }
        }
    }

    /// Calls `body` with each numeric argument of the message (integers of every width and
    /// floating-point values; not booleans, strings, redacted values or metadata), with its
    /// position among all the message's arguments. Allocates nothing.
    /// - Returns: whether metadata or an error follows the message's arguments.
    @inlinable @discardableResult
    public func forEachNumber(_ body: (_ position: Int, _ type: LogArgumentType, _ value: Number) throws -> Void) rethrows
        -> Bool
    {
        let args = raw.pointee.args
        let length = raw.pointee.args_length
        var offset: UInt32 = 0
        var arg = lb_arg()
        var position = 0
        while lb_arg_next(args, length, &offset, &arg) == 1 {
            guard arg.type < UInt8(LB_ARG_METADATA.rawValue) else { return true }  // the record's tail
            if let type = LogArgumentType(rawValue: arg.type) {
                switch type {
                case .int8, .int16, .int32, .int64, .int: try body(position, type, .signed(arg.value.i))
                case .uint8, .uint16, .uint32, .uint64, .uint: try body(position, type, .unsigned(arg.value.u))
                case .float, .double: try body(position, type, .floatingPoint(arg.value.f))
                default: break
                }
            }
            position += 1
        }
        return false
    }

    /// Whether an error is attached (`log.error("…", error: e)`). Walks the arguments.
    public var hasError: Bool {
        var offset: UInt32 = 0
        var arg = lb_arg()
        var open = 0  // items still to come in the containers being walked
        while lb_arg_next(raw.pointee.args, raw.pointee.args_length, &offset, &arg) == 1 {
            let topLevel = open == 0
            if !topLevel { open -= 1 }
            switch Int32(arg.type) {
            case Int32(LB_ARG_ERROR.rawValue):
                if topLevel { return true }
                open += Int(arg.value.u)
            case Int32(LB_ARG_METADATA.rawValue), Int32(LB_ARG_MAP.rawValue): open += 2 * Int(arg.value.u)
            case Int32(LB_ARG_LIST.rawValue): open += Int(arg.value.u)
            default: break
            }
        }
        return false
    }

    /// The call site within the reader (its session and number): records of one call site of one
    /// process have the same key. `UInt64.max` never occurs.
    public var siteKey: UInt64 { UInt64(raw.pointee.session) << 32 | UInt64(raw.pointee.site_id) }
    /// The logger within the reader (its session and number).
    public var loggerKey: UInt64 { UInt64(raw.pointee.session) << 32 | UInt64(raw.pointee.logger_id) }
}

extension LogReader {
    /// What ``stream(where:_:)`` hands out; records that fail it are skipped by the C reader
    /// before anything of them is decoded. The default passes everything.
    public struct Filter: Sendable {
        /// Records below this level are skipped.
        public var minimumLevel: LogLevel?
        /// Records above this level are skipped.
        public var maximumLevel: LogLevel?
        /// Records before this wall time (nanoseconds since the Unix epoch) are skipped.
        public var sinceNanoseconds: Int64?
        /// Records at or after this wall time are skipped.
        public var untilNanoseconds: Int64?
        /// Only these loggers: a name, or a prefix before a dot ('net' matches 'net.http'). Empty:
        /// every logger.
        public var loggers: [String]
        /// Decides per call site and logger (asked once for each): the site's template, file and
        /// line (`nil` when its meta entry was lost) and the logger's name.
        public var site: (@Sendable (_ template: String?, _ file: String?, _ line: UInt32, _ logger: String?) -> Bool)?

        public init(
            minimumLevel: LogLevel? = nil, maximumLevel: LogLevel? = nil, sinceNanoseconds: Int64? = nil,
            untilNanoseconds: Int64? = nil, loggers: [String] = [],
            site: (@Sendable (_ template: String?, _ file: String?, _ line: UInt32, _ logger: String?) -> Bool)? = nil
        ) {
            self.minimumLevel = minimumLevel
            self.maximumLevel = maximumLevel
            self.sinceNanoseconds = sinceNanoseconds
            self.untilNanoseconds = untilNanoseconds
            self.loggers = loggers
            self.site = site
        }

        /// Whether a logger's name is among ``loggers``.
        public func matches(logger name: String?) -> Bool {
            guard !loggers.isEmpty else { return true }
            let name = name ?? ""
            return loggers.contains { name == $0 || name.hasPrefix($0 + ".") }
        }
    }

    /// Reads what is new since the last read (as ``readNew()``) and calls `body` with each entry,
    /// in time order, borrowed: nothing is collected, and memory stays bounded by the chunks that
    /// overlap in time (about one per thread writing at once, more when writing threads were
    /// preempted; never growing with the bundle). Time order is exact once the writer has stopped;
    /// while one writes, a record committed late may come after a later one. Records the filter
    /// skips are never decoded; they count as read for ``verify()``, which is exact only after
    /// unfiltered reads. An error thrown by `body` stops the entries and is rethrown once the
    /// reader has read to the end of what was new (without decoding it): what `body` did not see
    /// counts as read, and the next read starts after it.
    ///
    /// ```swift
    /// var slow = 0
    /// try reader.stream(where: .init(minimumLevel: .warning)) { record in
    ///     if record.wallNanoseconds > 0 { slow += 1 }
    /// }
    /// ```
    public func stream(where filter: Filter = Filter(), _ body: (LogRecord) throws -> Void) throws {
        lb_reader_discard_entries(raw)
        hasScanned = true
        try withoutActuallyEscaping(body) { body in
            let context = StreamContext(reader: self, filter: filter, body: body)
            var c = lb_read_filter()
            c.min_level = filter.minimumLevel?.rawValue ?? 0
            c.max_level = filter.maximumLevel?.rawValue ?? 0
            c.since_ns = filter.sinceNanoseconds.map { $0 == 0 ? 1 : $0 } ?? 0
            c.until_ns = filter.untilNanoseconds.map { $0 == 0 ? 1 : $0 } ?? 0
            if !filter.loggers.isEmpty || filter.site != nil {
                c.accept = { context, site, logger in
                    let context = Unmanaged<StreamContext>.fromOpaque(context!).takeUnretainedValue()
                    let name = logger.map { String(cString: $0) }
                    guard context.filter.matches(logger: name) else { return 0 }
                    guard let decide = context.filter.site else { return 1 }
                    let info = site?.pointee
                    return decide(
                        info.map { String(cString: $0.template_text) }, info.map { String(cString: $0.file) },
                        info?.line ?? 0, name) ? 1 : 0
                }
            }
            let opaque = Unmanaged.passUnretained(context).toOpaque()
            c.accept_context = opaque
            let result = withExtendedLifetime(context) {
                lb_reader_stream(raw, &c, { context, entry in
                    // The context outlives the stream: no reference counting per entry.
                    Unmanaged<StreamContext>.fromOpaque(context!)._withUnsafeGuaranteedRef { context in
                        do {
                            try context.body(LogRecord(entry!, context.reader))
                            return 0
                        } catch {
                            context.failure = error
                            return 1
                        }
                    }
                }, opaque)
            }
            if let failure = context.failure { throw failure }
            if result < 0 { try check(Int32(result), .reader, "lb_reader_stream", path: path) }
        }
    }
}

private final class StreamContext {
    unowned(unsafe) let reader: LogReader
    let filter: LogReader.Filter
    let body: (LogRecord) throws -> Void
    var failure: Error?

    init(reader: LogReader, filter: LogReader.Filter, body: @escaping (LogRecord) throws -> Void) {
        self.reader = reader
        self.filter = filter
        self.body = body
    }
}
