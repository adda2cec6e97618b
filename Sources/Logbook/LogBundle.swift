import CLogbook
import CLogbookArchive
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How a full ring makes room for new records.
public enum WrapPolicy: UInt32, Sendable {
    /// Reuse the oldest sealed chunk: a flight recorder that keeps the newest records. With an
    /// archiver, new records still win when it falls behind: it never holds more than half of the
    /// free chunks, and the oldest sealed chunks are overwritten before they are archived, each
    /// counted (``BundleInfo/recordsOverwritten``) and reported by ``LogReader/verify()``.
    case overwrite = 1  // LB_WRAP_OVERWRITE
    /// Reuse only chunks the archiver has persisted. When the archiver falls behind, a writer waits
    /// (at most `losslessWaitMilliseconds`) and then drops the record, counted as `ring_full`; after
    /// such a wait, records are dropped at once until the archiver frees a chunk again, so a
    /// stalled archive disk costs one wait, not one per record.
    /// Without an archiver, a full lossless ring keeps its first records and drops the rest.
    case lossless = 2   // LB_WRAP_LOSSLESS
}

/// Why a record was dropped instead of stored (C: `LB_DROP_*`); its raw value is the name
/// `logbook info` and the metrics use.
public enum DropReason: String, Sendable, CaseIterable, Hashable {
    /// Larger than a record may be (1 MiB): `-EMSGSIZE`.
    case tooLarge = "too_large"
    /// No chunk could be claimed (the ring is full of chunks other threads hold).
    case noChunk = "no_chunk"
    /// Logged from inside a call that was logging on the same thread (a description that logs).
    case reentrant
    /// Logged after `close()`.
    case closed
    /// Its call site or logger could not be recorded in the meta file (say the disk is full).
    case meta
    /// A lossless ring stayed full past its wait.
    case ringFull = "ring_full"

    /// The reason of the C counter at `index` (`lb_counters.drops`), nil for one this version
    /// does not know.
    init?(index: Int) {
        guard let name = lb_drop_reason_name(UInt32(index)) else { return nil }
        self.init(rawValue: String(cString: name))
    }
}

/// Counters of a bundle: what was written and what was dropped, by reason.
public struct LogCounters: Sendable, Equatable {
    public var records: UInt64
    public var bytes: UInt64
    public var chunksClaimed: UInt64
    public var chunksReused: UInt64
    public var largeRecords: UInt64
    /// Dropped records by reason, every reason present (0 when none was dropped for it).
    public var drops: [DropReason: UInt64]
    public var dropped: UInt64 { drops.values.reduce(0, +) }

    init(_ c: lb_counters) {
        records = c.records
        bytes = c.bytes
        chunksClaimed = c.chunks_claimed
        chunksReused = c.chunks_reused
        largeRecords = c.large_records
        var drops: [DropReason: UInt64] = [:]
        withUnsafeBytes(of: c.drops) { raw in
            for (index, count) in raw.bindMemory(to: UInt64.self).enumerated() {
                if let reason = DropReason(index: index) { drops[reason] = count }
            }
        }
        self.drops = drops
    }
}

/// The ring of a bundle as its writer sees it now: chunks by state and the bytes they hold.
///
/// A snapshot taken by one pass over the chunk headers (see ``LogBundle/ringUsage``): chunks
/// change state while it reads, so the counts always add up to ``chunkCount`` but may mix
/// moments a few microseconds apart.
public struct RingUsage: Sendable, Equatable {
    public var chunkSize: Int
    public var chunkCount: Int
    /// Chunks never used since the ring was created.
    public var freeChunks: Int
    /// Chunks a thread is writing into (or claiming).
    public var activeChunks: Int
    /// Complete chunks not archived (without an archiver: every complete chunk).
    public var sealedChunks: Int
    /// Chunks the archiver is writing now.
    public var archivingChunks: Int
    /// Chunks the archiver persisted (a lossless ring reuses only these).
    public var archivedChunks: Int
    /// Bytes the ring holds: the committed part of every chunk that is not free, chunk headers
    /// included.
    public var bytesInUse: Int
    /// The ring's size: ``chunkSize`` times ``chunkCount``.
    public var capacity: Int { chunkSize * chunkCount }

    init(_ u: lb_ring_usage) {
        chunkSize = Int(u.chunk_size)
        chunkCount = Int(u.chunk_count)
        freeChunks = Int(u.chunks_free)
        activeChunks = Int(u.chunks_active)
        sealedChunks = Int(u.chunks_sealed)
        archivingChunks = Int(u.chunks_archiving)
        archivedChunks = Int(u.chunks_archived)
        bytesInUse = Int(u.bytes_in_use)
    }
}

/// A `.logbook` bundle opened for writing: a memory-mapped ring that survives a crash of the process.
///
/// ```swift
/// let bundle = try LogBundle(path: "/var/log/app.logbook")
/// let log = try bundle.logger("net")
/// log.info("request \(id) took \(ms) ms ok=\(ok)")
/// ```
///
/// One process may write a bundle at a time; a second writer gets ``LogbookError`` with
/// `isLockedByAnotherWriter`. Records are safe once logged: nothing needs flushing for them to
/// survive `kill -9`. The memory stays mapped until the last reference (loggers included) is gone,
/// so logging after ``close()`` is dropped and reported, never a crash.
public final class LogBundle: @unchecked Sendable {
    @usableFromInline let raw: OpaquePointer
    /// The bundle directory.
    public let path: String
    let archiveCallbacks: ArchiveCallbacks?

    /// What a bundle promises about a power loss or a kernel crash (a crash of the process loses
    /// nothing committed in either case: the ring is a shared file mapping).
    public enum Durability: Sendable, Equatable {
        /// No syncs: a power loss keeps whatever the kernel had written back (usually within 30 s);
        /// records that were not are lost, and a torn record is never shown. ``LogBundle/sync()`` makes
        /// everything logged before it durable.
        case none
        /// A background thread syncs the bundle this often (when anything was logged since the last
        /// sync, `lb_options.sync_interval_ms`): a power loss loses at most the records of the last
        /// interval and of the sync under way. The syncs copy what was logged into the bundle's
        /// `mirror` file (as large as the ring) and sync that, never the ring: the logging threads
        /// pay nothing measurable (docs/BENCHMARKS.md, `Benchmarks/durability.sh`), the disk writes what is logged.
        case interval(Duration)

        var milliseconds: Int {
            switch self {
            case .none: return 0
            case .interval(let d):
                let (seconds, attoseconds) = d.components
                let ms = seconds.multipliedReportingOverflow(by: 1000)
                return ms.overflow ? Int.max : max(1, Int(ms.partialValue) + Int(attoseconds / 1_000_000_000_000_000))
            }
        }
    }

    /// Who may read a bundle (`lb_options.permissions`). Nobody but its owner ever writes to it.
    /// A file another name reaches (a hard link) is never given a mode: a bundle file so is
    /// refused, an archive file so (the uploader's spool links complete ones) keeps its own.
    public enum Permissions: Sendable, Equatable {
        /// The directory 0700, its files 0600, the archive's too: only this user reads it (the
        /// default). Applied at every open, so a bundle an earlier open made group readable
        /// becomes private again.
        case `private`
        /// The directory 0750, its files 0640, the archive's too: the members of this user's group
        /// (a log shipper, an operator's account) read it with `logbook show` or ``LogReader``.
        /// Applied at every open, so an existing private bundle opened so becomes group readable
        /// (until it is opened `.private` again).
        case groupReadable

        var raw: UInt32 {
            switch self {
            case .private: return UInt32(LB_PERMISSIONS_PRIVATE.rawValue)
            case .groupReadable: return UInt32(LB_PERMISSIONS_GROUP_READABLE.rawValue)
            }
        }
    }

    /// Opens (or creates) the bundle at `path`.
    /// - Parameters:
    ///   - path: the bundle directory, created (0700, files 0600) if it does not exist. Its parent
    ///     must exist unless `createParentDirectories`.
    ///   - capacity: ring bytes, used when the bundle is created (an existing bundle keeps its size).
    ///   - chunkSize: bytes per chunk, a power of two from 4 KiB to 16 MiB.
    ///   - wrapPolicy: what happens when the ring is full.
    ///   - idleSealMilliseconds: seal a chunk whose thread has been idle this long (0: never).
    ///   - losslessWaitMilliseconds: with `.lossless`, how long a writer waits for the archiver to
    ///     free a chunk before dropping the record (0: drop at once).
    ///   - archive: persist every sealed chunk into rolling archive files (see ``ArchiveOptions``);
    ///     `nil`: no archiver.
    ///   - durability: what a power loss may take (see ``LogBundle/Durability``); `.none` by default.
    ///   - filter: runtime filter rules to start with (see ``LogFilter``).
    ///   - applyEnvironmentFilter: apply `LOGBOOK_FILTER` on top of `filter` (its rules replace those
    ///     for the same pattern). A malformed value is ignored with a line on stderr and in
    ///     ``environmentFilterWarning``: a typo in the environment never stops a program from logging.
    ///   - createParentDirectories: create the missing directories above the bundle directory too
    ///     (with its mode), resolved with the same checks (a symlink on the way is followed only
    ///     when this user or root owns it). `false`: a missing parent throws `ENOENT`.
    ///   - permissions: who may read the bundle (see ``Permissions``); `.private` by default.
    public init(
        path: String,
        capacity: Int = 16 << 20,
        chunkSize: Int = 64 << 10,
        wrapPolicy: WrapPolicy = .overwrite,
        idleSealMilliseconds: Int = 1000,
        losslessWaitMilliseconds: Int = 100,
        archive: ArchiveOptions? = nil,
        durability: Durability = .none,
        filter: LogFilter = LogFilter(),
        applyEnvironmentFilter: Bool = true,
        createParentDirectories: Bool = false,
        permissions: Permissions = .private
    ) throws(LogbookError) {
        try Self.checkRepresentable(path: path, archived: archive != nil, [
            (capacity >= 0, "capacity \(capacity) bytes is negative"),
            (0...Int(UInt32.max) ~= chunkSize,
             "chunk size \(chunkSize) is not a power of two from 4096 to 16777216 bytes (4 KiB to 16 MiB)"),
            (0...Int(UInt32.max) ~= idleSealMilliseconds,
             "idle seal \(idleSealMilliseconds) ms is out of range (0 to \(UInt32.max); 0: never)"),
            (0...Int(UInt32.max) ~= losslessWaitMilliseconds,
             "lossless wait \(losslessWaitMilliseconds) ms is out of range (0 to \(UInt32.max); 0: drop at once)"),
            (durability.milliseconds <= Int(UInt32.max),
             "sync interval \(durability) is out of range (1 ms to \(UInt32.max) ms)"),
        ] + (archive?.unrepresentable ?? []))
        var options = lb_options()
        lb_options_init(&options)
        options.capacity = UInt64(max(0, capacity))
        options.chunk_size = UInt32(clamping: chunkSize)
        options.wrap_policy = wrapPolicy.rawValue
        options.idle_seal_ms = UInt32(clamping: idleSealMilliseconds)
        options.lossless_wait_ms = UInt32(clamping: losslessWaitMilliseconds)
        options.ignore_environment_filter = applyEnvironmentFilter ? 0 : 1
        options.sync_interval_ms = UInt32(clamping: durability.milliseconds)
        options.create_parents = createParentDirectories ? 1 : 0
        options.permissions = permissions.raw
        var bundle: OpaquePointer?
        let spec = filter.rules.isEmpty ? nil : filter.description
        if let archive {
            let callbacks = ArchiveCallbacks(archive)
            let result = withOptionalCString(archive.directory) { directory in
                withOptionalCString(spec) { spec in
                    options.filter = spec
                    var archiveOptions = lb_archive_options(archive, callbacks: callbacks, directory: directory)
                    return lb_bundle_open_archived(path, &options, &archiveOptions, &bundle)
                }
            }
            try check(result, .bundle, "lb_bundle_open_archived", path: path, detailed: true)
            archiveCallbacks = callbacks
        } else {
            let result = withOptionalCString(spec) { spec in
                options.filter = spec
                return lb_bundle_open(path, &options, &bundle)
            }
            try check(result, .bundle, "lb_bundle_open", path: path, detailed: true)
            archiveCallbacks = nil
        }
        raw = bundle!
        self.path = path
    }

    /// Values the C options cannot hold (negative, or past their 32-bit fields) are refused in the
    /// C core's words, instead of being clamped into a value the caller never gave.
    private static func checkRepresentable(path: String, archived: Bool, _ checks: [(Bool, String)]) throws(LogbookError) {
        guard let problem = checks.first(where: { !$0.0 }) else { return }
        throw LogbookError(subject: .bundle, operation: archived ? "lb_bundle_open_archived" : "lb_bundle_open", path: path,
                           errno: EINVAL, detail: problem.1)
    }

    deinit {
        lb_bundle_close(raw)
        archiveCallbacks?.finish()
    }

    /// The C bundle (`lb_bundle *`) behind this one, for C code in the same program. Valid while
    /// this object lives.
    public var cBundle: OpaquePointer { raw }

    /// The logger with this name (created on first use; the same control for every call).
    public func logger(_ name: String) throws(LogbookError) -> Logger {
        var control: UnsafeMutablePointer<lb_logger>?
        try check(lb_logger_register(raw, name, &control), .bundle, "lb_logger_register", path: path)
        return Logger(bundle: self, control: control!)
    }

    /// Seals every thread's open chunk so readers see it complete, and schedules writeback.
    public func flush() throws(LogbookError) {
        try check(lb_bundle_flush(raw), .bundle, "lb_bundle_flush", path: path)
    }

    /// Makes every record logged before the call durable: it survives a power loss or a kernel
    /// crash, and ``LogReader/verify()`` fails if a reader cannot find it. Syncs the meta file and
    /// the archive file being written, copies what was logged since the last sync into the
    /// bundle's `mirror` file and syncs it, then records what it made durable (the `durable`
    /// file). Blocks for the disk; one sync runs at a time. From the first sync on, the archiver
    /// syncs each batch before it frees the chunks' slots, and ``close()`` ends with a sync.
    public func sync() throws(LogbookError) {
        try check(lb_bundle_sync(raw), .bundle, "lb_bundle_sync", path: path)
    }

    /// Seals all chunks and releases the writer lock. Later log calls are dropped and counted
    /// (`closed`); a call another thread was in the middle of is kept, so each thread's records
    /// are an unbroken run, its dropped calls after them. With an archiver, everything sealed is archived and the file being written is
    /// completed (END frame, fsync, rename, ``ArchiveOptions/onFileRolled``) first. A second
    /// `close()` throws ``LogbookError`` "the bundle is closed" (``LogbookError/isClosed``), as do
    /// ``flush()``, ``logger(_:)`` and the archive calls after it.
    public func close() throws(LogbookError) {
        defer { archiveCallbacks?.finish() }
        try check(lb_bundle_shutdown(raw), .bundle, "lb_bundle_shutdown", path: path)
    }

    /// What has been written and dropped so far.
    public var counters: LogCounters {
        var c = lb_counters()
        lb_bundle_counters(raw, &c)
        return LogCounters(c)
    }

    /// The ring's chunks by state and the bytes they hold, from one pass over the chunk headers:
    /// O(chunks) atomic loads, nothing on the logging path. Meant for pollers (a metrics reporter,
    /// a health check); after ``close()``, the chunks as close left them.
    public var ringUsage: RingUsage {
        var usage = lb_ring_usage()
        lb_bundle_ring_usage(raw, &usage)
        return RingUsage(usage)
    }
}

private func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
