import CLogbook
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One recorded log entry, decoded.
///
/// What belongs to the call site (file, function, line, column, template, source) is one object
/// shared by every entry of the site, and an attached error lives in a box: a reader holds
/// millions of entries, and their size is most of what reading them costs.
public struct LogEntry: Sendable {
    /// Nanoseconds since 1970-01-01T00:00:00Z.
    public var wallNanoseconds: Int64
    public var level: LogLevel?
    public var rawLevel: UInt8
    /// The logger's name, or `nil` when its meta entry was lost.
    public var logger: String?
    public var arguments: [LogValue]
    /// Structured metadata (from a `metadata:` argument, swift-log, or C), sorted by key.
    public var metadata: LogMetadata = LogMetadata()
    public var threadID: UInt32
    public var processID: UInt32
    public var chunkSequence: UInt64
    public var chunkOffset: UInt32
    /// The call site, or `nil` when its meta entry was lost.
    var site: Site?
    private var errorBox: ErrorBox?

    /// The strings of a call site, made once per site by the reader.
    final class Site: Sendable {
        let file: String?
        let function: String?
        let template: String?
        let source: String?
        let line: UInt32
        let column: UInt32
        /// The template split at its placeholders.
        let segments: TemplateSegments?

        init(file: String?, function: String?, template: String?, source: String?, line: UInt32, column: UInt32) {
            self.file = file
            self.function = function
            self.template = template
            self.source = source
            self.line = line
            self.column = column
            segments = template.map(TemplateSegments.init)
        }

        func with(file: String?? = nil, function: String?? = nil, template: String?? = nil, source: String?? = nil,
                  line: UInt32? = nil, column: UInt32? = nil) -> Site {
            Site(file: file ?? self.file, function: function ?? self.function, template: template ?? self.template,
                 source: source ?? self.source, line: line ?? self.line, column: column ?? self.column)
        }

        static let unknown = Site(file: nil, function: nil, template: nil, source: nil, line: 0, column: 0)
    }

    private final class ErrorBox: Sendable {
        let error: LoggedError
        init(_ error: LoggedError) { self.error = error }
    }

    init(wallNanoseconds: Int64, rawLevel: UInt8, logger: String?, site: Site?, arguments: [LogValue],
         metadata: LogMetadata, error: LoggedError?, threadID: UInt32, processID: UInt32,
         chunkSequence: UInt64, chunkOffset: UInt32) {
        self.wallNanoseconds = wallNanoseconds
        self.level = LogLevel(rawValue: rawLevel)
        self.rawLevel = rawLevel
        self.logger = logger
        self.site = site
        self.arguments = arguments
        self.metadata = metadata
        self.errorBox = error.map(ErrorBox.init)
        self.threadID = threadID
        self.processID = processID
        self.chunkSequence = chunkSequence
        self.chunkOffset = chunkOffset
    }

    public var file: String? {
        get { site?.file }
        set { site = (site ?? .unknown).with(file: .some(newValue)) }
    }
    public var line: UInt32 {
        get { site?.line ?? 0 }
        set { site = (site ?? .unknown).with(line: newValue) }
    }
    public var column: UInt32 {
        get { site?.column ?? 0 }
        set { site = (site ?? .unknown).with(column: newValue) }
    }
    public var function: String? {
        get { site?.function }
        set { site = (site ?? .unknown).with(function: .some(newValue)) }
    }
    /// The call site's constant text with `{}` for each argument, or `nil` when the site is unknown.
    public var template: String? {
        get { site?.template }
        set { site = (site ?? .unknown).with(template: .some(newValue)) }
    }
    /// The module or subsystem the call came from (swift-log's `source`; the module of `#fileID`
    /// for Logbook's own loggers), or `nil` when the site does not say.
    public var source: String? {
        get { site?.source }
        set { site = (site ?? .unknown).with(source: .some(newValue)) }
    }
    /// An error attached to the call (`error:` of a log call).
    public var error: LoggedError? {
        get { errorBox?.error }
        set { errorBox = newValue.map(ErrorBox.init) }
    }
    /// The template split at its placeholders, shared by every entry of the site.
    var segments: TemplateSegments? { site?.segments }

    /// The message with its arguments filled in (no escaping: see ``escapingControlCharacters(_:)``).
    public var message: String {
        var renderer = LineRenderer(capacity: 128)
        renderer.appendMessage(self, .none)
        return String(decoding: renderer.bytes, as: UTF8.self)
    }

    /// The time as RFC 3339 UTC with nanoseconds, e.g. `2026-11-21T08:13:00.123456789Z`.
    public var timestamp: String { formatRFC3339(nanoseconds: wallNanoseconds) }

    /// The level's name, or `levelN` for a level this version does not know.
    public var levelName: String { level?.description ?? "level\(rawLevel)" }
}

/// A problem the reader found in a bundle.
public struct LogIssue: Sendable, CustomStringConvertible {
    public enum Kind: UInt32, Sendable {
        /// Bytes that should be valid are not.
        case corrupt = 1       // LB_ISSUE_CORRUPT
        /// A file is shorter than it should be.
        case truncated = 2     // LB_ISSUE_TRUNCATED
        /// An incomplete write at a crash (a meta tail, a large record cut short, a bundle whose
        /// creation was cut short: nothing was logged to it).
        case torn = 3          // LB_ISSUE_TORN
        /// A record names a call site that no meta entry defines.
        case unknownSite = 4   // LB_ISSUE_UNKNOWN_SITE
        /// A file, chunks or records that the bundle says it holds are not there.
        case missing = 5       // LB_ISSUE_MISSING
        /// Records the overwrite policy destroyed before they were archived or read (also the
        /// rest of a large record whose beginning it destroyed: ``LogIssue/isBeginningOverwritten``).
        case overwritten = 6   // LB_ISSUE_OVERWRITTEN
    }
    public var kind: Kind
    /// "ring", "meta", "archive" or the name of an archive file.
    public var file: String
    public var offset: UInt64
    public var length: UInt64
    public var reason: String
    /// The records this issue accounts for (unreadable, lost or overwritten); 0 when it cannot say.
    public var records: UInt64

    /// Whether `logbook verify` fails on it: everything but a torn write at a crash and records
    /// the overwrite policy destroyed (both expected and counted).
    public var isFailure: Bool { kind != .torn && kind != .overwritten }

    /// A record that was not shown because its bytes are not what was logged: it crosses a page
    /// and its pages came back from different moments after a power loss (or were damaged).
    public var isAlteredRecord: Bool { reason.contains("fails its page check") }

    /// The rest of a large record whose beginning the overwrite policy destroyed: the record is
    /// counted in ``LogReader/overwrittenRecords`` too (it was overwritten, not damaged).
    public var isBeginningOverwritten: Bool { kind == .overwritten && reason.contains("beginning was overwritten") }

    public var kindName: String {
        switch kind {
        case .corrupt: "corrupt"
        case .truncated: "truncated"
        case .torn: "torn"
        case .unknownSite: "unknown-site"
        case .missing: "missing"
        case .overwritten: "overwritten"
        }
    }

    public var description: String {
        var text = "\(kindName) \(file) offset \(offset) length \(length)"
        if records > 0 { text += " records \(records)" }
        return text + ": \(reason)"
    }
}

/// What ``LogReader/verify()`` found once every entry was read.
public struct VerifySummary: Sendable, Equatable {
    /// Entries read.
    public var recordsFound: UInt64
    /// What the bundle's counters say it holds now: records written, less those overwritten and
    /// those in archive files retention deleted. `nil` when that could not be checked (see
    /// ``accounted``): a writer runs, the ring header is damaged, or its counters are impossible.
    public var recordsExpected: UInt64?
    /// Records the issues account for (damaged, cut short).
    public var recordsUnreadable: UInt64
    /// Records expected but neither found nor accounted for by an issue.
    public var recordsLost: UInt64
    /// Records the overwrite policy destroyed before they were archived, a large record whose
    /// beginning it destroyed included (its last fragment is still here).
    public var recordsOverwritten: UInt64
    /// Records in archive files that retention deleted.
    public var recordsRetired: UInt64
    /// Records never stored: dropped when they were logged, counted by reason.
    public var recordsDropped: UInt64
    /// Whether the counts were checked: the ring header is intact, its counters possible, and no
    /// writer runs.
    public var accounted: Bool
    /// A writer holds the bundle: counts move while it runs, so only files and bytes were checked.
    public var writerAlive: Bool
    /// The issues that fail verification (``LogIssue/isFailure``), the scans' included: 0 when the
    /// bundle verified clean (`logbook verify` exits 1 otherwise).
    public var failures: Int = 0

    init(_ v: lb_verify_summary) {
        recordsFound = v.records_found
        recordsExpected = v.accounted != 0 ? v.records_expected : nil
        recordsUnreadable = v.records_unreadable
        recordsLost = v.records_lost
        recordsOverwritten = v.records_overwritten
        recordsRetired = v.records_retired
        recordsDropped = v.records_dropped
        accounted = v.accounted != 0
        writerAlive = v.writer_alive != 0
    }
}

/// Facts about a bundle: geometry, writer, chunk states and counters.
public struct BundleInfo: Sendable {
    public var formatVersion: UInt32
    public var chunkSize: UInt32
    public var chunkCount: UInt32
    public var wrapPolicy: WrapPolicy?
    public var createdNanoseconds: Int64
    public var writerPID: UInt32
    public var writerAlive: Bool
    public var chunksFree, chunksActive, chunksSealed, chunksArchived: UInt64
    public var counters: LogCounters
    /// Records of sealed, unarchived chunks that the overwrite policy reused: gone for good.
    public var recordsOverwritten: UInt64
    /// Chunk claims a crash cut short (they held nothing), and chunks with a damaged header that
    /// recovery cleared (their records are lost).
    public var claimsAbandoned: UInt64
    public var chunksDiscarded: UInt64
    public var sessions: [Session]
    /// What the archiver recorded in the ring, and how far it lags (all zero when none ran).
    public var archive: ArchiveStatus

    public struct ArchiveStatus: Sendable {
        /// How the archiver wrote, or `nil` when no archiver ever ran on this bundle.
        public var backend: ArchiveBackend?
        /// Sealed chunks not yet archived (being written included), their bytes, and when the
        /// oldest of them was started.
        public var lagChunks: UInt64
        public var lagBytes: UInt64
        public var oldestUnarchivedNanoseconds: Int64?
        public var archivedChunks: UInt64
        public var archivedBytes: UInt64
        public var failures: UInt64
        /// The errno of the last failure, 0 when the last attempt succeeded.
        public var lastError: Int32
        /// Overwrite policy: sealed chunks reused before the archiver persisted them.
        public var chunksLostUnarchived: UInt64
        /// The archive file numbers that must exist (retention deleted those below), `nil` when
        /// no archive file was ever made.
        public var fileNumbers: Range<UInt64>?
        /// Records in the archive files retention deleted.
        public var retiredRecords: UInt64
    }

    public struct Session: Sendable {
        public var index: UInt32
        public var pid: UInt32
        public var host: String
        public var executable: String
        public var startedNanoseconds: Int64
        public var clock: String
        public var ticksPerSecond: UInt64
    }
}

/// Reads a bundle, live or after its writer exited or was killed. It never maps the files and
/// never trusts a length: damage becomes ``issues``, not a crash.
///
/// ```swift
/// let reader = try LogReader(path: "app.logbook")
/// for entry in try reader.readAll() { print(entry.timestamp, entry.message) }
/// ```
public final class LogReader {
    package private(set) var raw: OpaquePointer
    public let path: String
    /// Whether `raw` has scanned: ``readAll()`` then starts again with a fresh C reader.
    var hasScanned = false

    /// Opens a bundle, an archive directory or one archive file for reading; nothing is read
    /// until ``readAll()``, ``readNew()`` or ``scan(_:)``.
    ///
    /// Throws a ``LogbookError`` naming the path when there is nothing of Logbook's to read:
    /// a path that does not exist (`ENOENT`), a directory that is neither a bundle nor an archive
    /// directory, and a file that is no archive file (`EPROTO`). A damaged bundle or archive file
    /// opens, and its damage is reported in ``issues``.
    public init(path: String) throws(LogbookError) {
        raw = try Self.openReader(path)
        self.path = path
    }

    deinit { lb_reader_close(raw) }

    private static func openReader(_ path: String) throws(LogbookError) -> OpaquePointer {
        var reader: OpaquePointer?
        try check(lb_reader_open(path, &reader), .reader, "lb_reader_open", path: path, detailed: true)
        return reader!
    }

    /// Reads what is new since the last call (of this method, ``readAll()`` or ``scan(_:)``) and
    /// returns it in time order. Entries already returned are not returned again. Memory of
    /// earlier calls is released.
    public func readNew() throws(LogbookError) -> [LogEntry] {
        lb_reader_discard_entries(raw)
        hasScanned = true
        let result = lb_reader_scan(raw)
        if result < 0 { try check(Int32(result), .reader, "lb_reader_scan", path: path) }
        var entries: [LogEntry] = []
        entries.reserveCapacity(Int(result))
        forEachHeld { entries.append($0) }
        return entries
    }

    /// Reads every entry the bundle holds now, from the beginning, in time order: also on a
    /// reader that has read before (it reads the path again, as a new reader would), so two
    /// calls return the same entries while nothing new is written. ``issues``,
    /// ``overwrittenRecords`` and ``verify()`` then describe this read; a later ``readNew()``
    /// returns what came after it.
    public func readAll() throws(LogbookError) -> [LogEntry] {
        if hasScanned { try reopen() }
        return try readNew()
    }

    /// Starts again with a fresh C reader on the same path (a C reader only moves forward).
    private func reopen() throws(LogbookError) {
        let fresh = try Self.openReader(path)
        lb_reader_close(raw)
        raw = fresh
        hasScanned = false
        siteCache = [:]
        loggerCache = [:]
        lastSite = nil
    }

    /// Scans for new entries and calls `body` for each, in time order, without collecting them:
    /// ``stream(where:_:)`` with each entry decoded (memory bounded by the read window).
    public func scan(_ body: (LogEntry) throws -> Void) throws {
        try stream { try body($0.entry) }
    }

    // MARK: - Sessions (package: the exporter names each process's executable)

    /// How many writing sessions the scans so far know (``knownSessions`` is made only when it grows).
    package var knownSessionCount: Int { lb_reader_session_count(raw) }

    /// The writing sessions known from the scans so far (pid, executable, host), in any mode: a
    /// bundle, an archive directory or an archive file.
    package var knownSessions: [BundleInfo.Session] {
        (0..<lb_reader_session_count(raw)).compactMap { index -> BundleInfo.Session? in
            guard let s = lb_reader_session(raw, index)?.pointee else { return nil }
            return BundleInfo.Session(
                index: s.session, pid: s.pid, host: String(cString: s.host), executable: String(cString: s.executable),
                startedNanoseconds: Int64(bitPattern: s.wall_anchor_ns),
                clock: s.clock == LB_CLOCK_TSC.rawValue ? "tsc" : "monotonic", ticksPerSecond: s.ticks_per_second)
        }
    }

    private func forEachHeld(_ body: (LogEntry) -> Void) {
        let count = lb_reader_entry_count(raw)
        var raw = lb_entry()
        for index in 0..<count {
            lb_reader_entry(self.raw, index, &raw)
            body(decode(raw))
        }
    }

    private var siteCache: [UInt64: LogEntry.Site] = [:]
    private var loggerCache: [UInt64: String] = [:]

    private var lastSite: (key: UInt64, site: LogEntry.Site)?

    /// The strings of a call site, made once per site rather than once per entry.
    func site(_ session: UInt32, _ id: UInt32) -> LogEntry.Site? {
        let key = UInt64(session) << 32 | UInt64(id)
        if let lastSite, lastSite.key == key { return lastSite.site }
        if let cached = siteCache[key] {
            lastSite = (key, cached)
            return cached
        }
        guard let info = lb_reader_site(raw, session, id)?.pointee else { return nil }
        let site = LogEntry.Site(
            file: String(cString: info.file), function: String(cString: info.function),
            template: String(cString: info.template_text),
            source: info.source.pointee == 0 ? nil : String(cString: info.source), line: info.line, column: info.column)
        siteCache[key] = site
        return site
    }

    func loggerName(_ session: UInt32, _ id: UInt16) -> String? {
        let key = UInt64(session) << 32 | UInt64(id)
        if let cached = loggerCache[key] { return cached }
        guard let name = lb_reader_logger_name(raw, session, id) else { return nil }
        let text = String(cString: name)
        loggerCache[key] = text
        return text
    }

    func decode(_ e: lb_entry) -> LogEntry {
        let site = site(e.session, e.site_id)
        var arguments: [LogValue] = []
        var metadata = LogMetadata()
        var error: LoggedError?
        var offset: UInt32 = 0
        var arg = lb_arg()
        while lb_arg_next(e.args, e.args_length, &offset, &arg) == 1 {
            if let value = LogValue(arg) {
                arguments.append(value)
                continue
            }
            // The record's tail: metadata, then an error (structure checked by the C reader).
            var tail = RecordTailDecoder(args: e.args, length: e.args_length, offset: offset)
            if arg.type == UInt8(LB_ARG_METADATA.rawValue) {
                metadata = LogMetadata(tail.pairs(count: arg.value.u, depth: 1))
            } else if arg.type == UInt8(LB_ARG_ERROR.rawValue) {
                let strings = tail.strings(count: arg.value.u)
                if strings.count == 2 { error = LoggedError(type: strings[0], description: strings[1]) }
            }
            offset = tail.offset
        }
        let entry = LogEntry(
            wallNanoseconds: e.wall_ns, rawLevel: e.level, logger: loggerName(e.session, e.logger_id), site: site,
            arguments: arguments, metadata: metadata, error: error, threadID: e.thread_id, processID: e.pid,
            chunkSequence: e.chunk_sequence, chunkOffset: e.chunk_offset)
        return entry
    }

    /// Every problem found so far, in the order found.
    public var issues: [LogIssue] {
        (0..<lb_reader_issue_count(raw)).compactMap { index in
            var issue = lb_issue()
            guard lb_reader_issue(raw, index, &issue) == 0, let kind = LogIssue.Kind(rawValue: issue.kind) else {
                return nil
            }
            return LogIssue(
                kind: kind, file: String(cString: issue.file), offset: issue.offset, length: issue.length,
                reason: String(cString: issue.reason), records: issue.records)
        }
    }

    /// Checks what needs the whole bundle, once every entry has been read (call it after the
    /// last ``scan(_:)`` or ``readAll()``), and adds an issue for each thing missing: archive
    /// files (their numbers have no gaps), chunks of a lossless bundle, counters no bundle can
    /// reach, and records (what was read, plus what the issues account for, must match what the
    /// bundle counted). ``VerifySummary/failures`` counts the issues that fail it.
    /// Call it once per reader.
    public func verify() throws(LogbookError) -> VerifySummary {
        var summary = lb_verify_summary()
        let failures = lb_reader_verify(raw, &summary)  // the failing issues, or -errno
        try check(failures, .reader, "lb_reader_verify", path: path)
        var result = VerifySummary(summary)
        result.failures = Int(failures)
        return result
    }

    /// Records of an overwrite ring destroyed before this reader could read them, since its first
    /// scan: a follower that a fast writer lapped. Exact once the writer stops; while it runs it
    /// may lag by the chunks reused during the last scan, never run ahead.
    public var overwrittenRecords: UInt64 { lb_reader_overwritten(raw) }

    /// Whether the bundle at ``path`` is still the one this reader reads.
    public enum BundleIdentity: Sendable, Equatable {
        /// The same ring file (also for a reader of archives).
        case same
        /// Its ring is another file: the bundle was removed and made again at the path. This
        /// reader goes on reading the old one; a new reader reads the new one.
        case replaced
        /// No ring is there any more.
        case removed
    }

    /// Whether the bundle at ``path`` is still the one this reader reads (a follower asks after
    /// each scan).
    public func bundleIdentity() throws(LogbookError) -> BundleIdentity {
        let rc = lb_reader_ring_replaced(raw)
        try check(rc, .reader, "lb_reader_ring_replaced", path: path)
        switch rc {
        case 0: return .same
        case 1: return .replaced
        default: return .removed  // 2
        }
    }

    /// Geometry, writer state, chunk states and counters; sessions known from the last scan.
    public func info() throws(LogbookError) -> BundleInfo {
        var info = lb_ring_info()
        try check(lb_reader_ring_info(raw, &info), .reader, "lb_reader_ring_info", path: path)
        let sessions = (0..<lb_reader_session_count(raw)).compactMap { index -> BundleInfo.Session? in
            guard let s = lb_reader_session(raw, index)?.pointee else { return nil }
            return BundleInfo.Session(
                index: s.session, pid: s.pid, host: String(cString: s.host), executable: String(cString: s.executable),
                startedNanoseconds: Int64(bitPattern: s.wall_anchor_ns),
                clock: s.clock == LB_CLOCK_TSC.rawValue ? "tsc" : "monotonic", ticksPerSecond: s.ticks_per_second)
        }
        return BundleInfo(
            formatVersion: info.format_version, chunkSize: info.chunk_size, chunkCount: info.chunk_count,
            wrapPolicy: WrapPolicy(rawValue: info.wrap_policy),
            createdNanoseconds: Int64(bitPattern: info.created_wall_ns), writerPID: info.writer_pid,
            writerAlive: info.writer_alive != 0, chunksFree: info.chunks_free, chunksActive: info.chunks_active,
            chunksSealed: info.chunks_sealed, chunksArchived: info.chunks_archived,
            counters: LogCounters(info.counters), recordsOverwritten: info.records_overwritten,
            claimsAbandoned: info.claims_abandoned, chunksDiscarded: info.chunks_discarded, sessions: sessions,
            archive: BundleInfo.ArchiveStatus(
                backend: info.archive_backend == 0 ? nil : ArchiveBackend(UInt32(info.archive_backend)),
                lagChunks: info.chunks_sealed + info.chunks_archiving, lagBytes: info.unarchived_bytes,
                oldestUnarchivedNanoseconds: info.oldest_unarchived_wall_ns == 0 ? nil : info.oldest_unarchived_wall_ns,
                archivedChunks: info.archived_chunks, archivedBytes: info.archived_bytes,
                failures: info.archive_failures, lastError: Int32(bitPattern: info.archive_last_error),
                chunksLostUnarchived: info.chunks_lost_unarchived,
                fileNumbers: info.archive_next_number == 0 ? nil
                    : max(1, info.archive_first_number)..<max(max(1, info.archive_first_number), info.archive_next_number),
                retiredRecords: info.archive_retired_records))
    }

    /// Whether the reader reads a bundle (ring and meta), rather than archive files only.
    public var isBundle: Bool {
        var info = lb_ring_info()
        return lb_reader_ring_info(raw, &info) != -ENOTSUP
    }

    /// Whether this is a bundle whose creation was cut short (a kill while it was made left its
    /// directory with `lock` alone, or the creation is under way): nothing was ever logged to it,
    /// and it has no ring for ``info()`` to describe. It reads as empty, with one torn issue that
    /// says so (not damage: `verify` passes); the next writer's open completes it.
    public var wasNeverCompleted: Bool { lb_reader_never_completed(raw) != 0 }

    /// Which ring the records belong to: its creation time (`created_wall_ns`), from the ring
    /// header of a bundle, or, for an archive directory or file read without its bundle, from the
    /// header of the newest archive file that reads (also when a bundle's ring header does not);
    /// nil when neither is known. A bundle made again at the same path has another, and numbers
    /// its chunks and archive files from 1 again.
    public func ringCreatedNanoseconds() -> UInt64? {
        var info = lb_ring_info()
        if lb_reader_ring_info(raw, &info) == 0 && info.created_wall_ns != 0 { return info.created_wall_ns }
        var ring: UInt64 = 0
        return lb_reader_archive_ring(raw, &ring) == 0 && ring != 0 ? ring : nil
    }

    /// The archive files this reader reads: the bundle's archive directory, an archive
    /// directory, or the one file it was opened on.
    public func archiveFiles() throws(LogbookError) -> ArchiveDirectoryInfo {
        var info = lb_archive_info()
        try check(lb_reader_archive_info(raw, &info), .reader, "lb_reader_archive_info", path: path)
        return ArchiveDirectoryInfo(
            files: info.files, writingFiles: info.writing_files, unsyncedFiles: info.unsynced_files,
            compressedFiles: info.compressed_files, bytes: info.bytes,
            numbers: info.newest_number == 0 ? nil : info.oldest_number...info.newest_number)
    }
}

/// The archive files a reader sees.
public struct ArchiveDirectoryInfo: Sendable {
    /// Complete files.
    public var files: UInt64
    /// Files being written (or left by a crash until the bundle is opened again).
    public var writingFiles: UInt64
    /// Complete files whose fsync failed: they may miss data.
    public var unsyncedFiles: UInt64
    /// Of the complete files, those compressed (`.lba.zst`).
    public var compressedFiles: UInt64
    /// Bytes on disk.
    public var bytes: UInt64
    /// The file numbers, oldest to newest.
    public var numbers: ClosedRange<UInt64>?
}
