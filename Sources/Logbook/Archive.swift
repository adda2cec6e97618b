import CLogbook
import CLogbookArchive
import Synchronization

/// How the archiver persists the ring: rolling files in a directory, kept within a count and a
/// disk quota. Pass it to ``LogBundle/init(path:capacity:chunkSize:wrapPolicy:idleSealMilliseconds:losslessWaitMilliseconds:archive:durability:filter:applyEnvironmentFilter:createParentDirectories:permissions:)``.
///
/// The defaults suit binary chunks: 16 MiB files (256 chunks of 64 KiB, about 350,000 typical
/// records), rolled after 24 hours, 16 files within 256 MiB.
public struct ArchiveOptions: Sendable {
    /// The archive directory; `nil` puts it inside the bundle (`NAME.logbook/archive`). Another
    /// directory is linked from there so that readers find it.
    public var directory: String?
    /// A file rolls before it would grow past this many bytes (at least 64 KiB).
    public var maxFileSize: Int
    /// A file rolls when it is this old and holds any chunk; `nil`: never by age.
    public var rollInterval: Duration?
    /// Complete files kept; the oldest are deleted first. `nil`: no limit.
    public var maxFiles: Int?
    /// Bytes on disk of all archive files together (compressed files count their compressed
    /// bytes; the file being written included); the oldest complete files are deleted first.
    /// `nil`: no limit. At least `maxFileSize`.
    public var quota: Int?
    /// The zstd level complete files are compressed with (`archive-N.lba.zst`, read like the
    /// `.lba` by every reader), on a second thread, off the logging path. Level 1, the default,
    /// makes Logbook's records 7–12× smaller at ~400 MB/s; higher levels cost much more time for
    /// little more. `nil`: files stay uncompressed.
    public var compressionLevel: Int?
    /// Write with `pwritev` even where io_uring is available.
    public var forcePwrite: Bool
    /// Called when a file is complete under its final name (fsynced and renamed; with
    /// compression, once the `.lba.zst` replaced the `.lba`), on the archiver's thread or its
    /// compression thread, e.g. to hand it to an uploader. It must return quickly. ``LogBundle/rolledFiles()`` offers the same as an
    /// async sequence.
    public var onFileRolled: (@Sendable (ArchivedFile) -> Void)?
    /// The wall clock used for rolling by age, in nanoseconds since the epoch (tests inject one).
    public var clock: (@Sendable () -> Int64)?

    public init(
        directory: String? = nil,
        maxFileSize: Int = 16 << 20,
        rollInterval: Duration? = .seconds(24 * 3600),
        maxFiles: Int? = 16,
        quota: Int? = 256 << 20,
        compressionLevel: Int? = 1,
        forcePwrite: Bool = false,
        onFileRolled: (@Sendable (ArchivedFile) -> Void)? = nil,
        clock: (@Sendable () -> Int64)? = nil
    ) {
        self.directory = directory
        self.maxFileSize = maxFileSize
        self.rollInterval = rollInterval
        self.maxFiles = maxFiles
        self.quota = quota
        self.compressionLevel = compressionLevel
        self.forcePwrite = forcePwrite
        self.onFileRolled = onFileRolled
        self.clock = clock
    }
}

extension ArchiveOptions {
    /// The options the C archiver cannot hold as given, each with what is wrong (see
    /// `LogBundle.checkRepresentable`).
    var unrepresentable: [(Bool, String)] {
        [
            (maxFileSize >= 0, "max file size \(maxFileSize) bytes is under the minimum of 65536 bytes (64 KiB)"),
            (quota.map { $0 >= 0 } ?? true, "quota \(quota ?? 0) bytes is negative (nil: no quota)"),
            (maxFiles.map { 1...Int(UInt32.max) ~= $0 } ?? true,
             "max files \(maxFiles ?? 0) is out of range (1 to \(UInt32.max); nil: no limit)"),
            (rollInterval.map { $0 >= .zero } ?? true,
             "roll interval \(rollInterval ?? .zero) is negative (nil: never by age)"),
            (compressionLevel.map { $0 != 0 && Int(Int32.min)...Int(Int32.max) ~= $0 } ?? true,
             "compression level \(compressionLevel ?? 0) is not a zstd level (nil: no compression)"),
        ]
    }
}

/// A complete archive file.
public struct ArchivedFile: Sendable, Equatable {
    /// Its final name: `archive-N.lba.zst` when compressed, else `archive-N.lba`.
    public var path: String
    public var number: UInt64
    /// Bytes on disk.
    public var bytes: UInt64
    /// What it decompresses to (`bytes` when it is not compressed).
    public var uncompressedBytes: UInt64
    public var isCompressed: Bool { path.hasSuffix(".zst") }
    public var chunks: UInt64
    /// Records in its chunks.
    public var records: UInt64
    /// The lowest and highest chunk sequence it holds.
    public var sequences: ClosedRange<UInt64>?
    public var createdNanoseconds: Int64

    init(_ f: lb_archive_file) {
        path = String(cString: f.path)
        number = f.number
        bytes = f.bytes
        uncompressedBytes = f.uncompressed_bytes
        chunks = f.chunks
        records = f.records
        sequences = f.first_sequence == 0 ? nil : f.first_sequence...max(f.first_sequence, f.last_sequence)
        createdNanoseconds = f.created_wall_ns
    }
}

/// How the archiver writes (C: `LB_ARCHIVE_BACKEND_*`); its raw value is the name `logbook info`
/// prints.
public enum ArchiveBackend: String, Sendable, Hashable {
    /// Batched io_uring writes.
    case ioUring = "io_uring"
    /// `pwritev`, where io_uring is unavailable or was refused.
    case pwrite

    init(_ value: UInt32) { self = value == LB_ARCHIVE_BACKEND_IO_URING.rawValue ? .ioUring : .pwrite }
}

/// What the archiver has done and how far it lags behind the ring.
public struct ArchiveStats: Sendable {
    /// io_uring, or `pwrite` where io_uring is unavailable or was refused.
    public var backend: ArchiveBackend
    /// The errno of the last failure (e.g. `ENOSPC`), or 0 after the next success.
    public var lastError: Int32
    public var failures: UInt64
    public var chunksArchived: UInt64
    public var bytesArchived: UInt64
    public var filesRolled: UInt64
    public var filesDeleted: UInt64
    /// Complete files in the directory now, and the bytes of all files.
    public var files: UInt64
    public var directoryBytes: UInt64
    /// Sealed chunks (and their bytes) not archived yet.
    public var lagChunks: UInt64
    public var lagBytes: UInt64
    /// Files compressed since open, and files left uncompressed (damaged, or an error).
    public var filesCompressed: UInt64
    public var compressionFailures: UInt64
    /// Complete files waiting for compression now (retention waits for them too).
    public var compressionPending: UInt64
    /// Bytes of the files compressed since open, before and after.
    public var bytesBeforeCompression: UInt64
    public var bytesAfterCompression: UInt64

    init(_ s: lb_archive_stats) {
        backend = ArchiveBackend(UInt32(s.backend))
        lastError = -s.last_error
        failures = s.failures
        chunksArchived = s.chunks_archived
        bytesArchived = s.bytes_archived
        filesRolled = s.files_rolled
        filesDeleted = s.files_deleted
        files = s.files
        directoryBytes = s.directory_bytes
        lagChunks = s.lag_chunks
        lagBytes = s.lag_bytes
        filesCompressed = s.files_compressed
        compressionFailures = s.compression_failures
        compressionPending = s.compression_pending
        bytesBeforeCompression = s.bytes_before_compression
        bytesAfterCompression = s.bytes_after_compression
    }
}

/// Bridges the C archiver's callbacks to Swift closures and async sequences. Lives as long as the
/// bundle (the C side holds an unretained pointer to it).
final class ArchiveCallbacks: Sendable {
    let onFileRolled: (@Sendable (ArchivedFile) -> Void)?
    let clock: (@Sendable () -> Int64)?
    private let streams = Locked<[Int: AsyncStream<ArchivedFile>.Continuation]>([:])
    private let nextStream = Atomic<Int>(0)

    init(_ options: ArchiveOptions) {
        onFileRolled = options.onFileRolled
        clock = options.clock
    }

    func rolled(_ file: ArchivedFile) {
        onFileRolled?(file)
        for continuation in streams.withLock({ Array($0.values) }) { continuation.yield(file) }
    }

    func stream() -> AsyncStream<ArchivedFile> {
        let id = nextStream.add(1, ordering: .relaxed).newValue
        return AsyncStream(bufferingPolicy: .bufferingNewest(1024)) { continuation in
            streams.withLock { $0[id] = continuation }
            continuation.onTermination = { [weak self] _ in
                _ = self?.streams.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    func finish() {
        for continuation in streams.withLock({ Array($0.values) }) { continuation.finish() }
    }
}

extension lb_archive_options {
    init(_ options: ArchiveOptions, callbacks: ArchiveCallbacks, directory: UnsafePointer<CChar>?) {
        self.init()
        lb_archive_options_init(&self)
        self.directory = directory
        max_file_size = UInt64(max(0, options.maxFileSize))
        roll_interval_ms = options.rollInterval.map { UInt64(wholeMilliseconds($0)) } ?? 0
        max_files = UInt32(clamping: options.maxFiles ?? 0)
        quota = UInt64(max(0, options.quota ?? 0))
        backend = options.forcePwrite ? LB_ARCHIVE_BACKEND_PWRITE.rawValue : 0
        compression_level = Int32(clamping: options.compressionLevel ?? 0)
        let context = Unmanaged.passUnretained(callbacks).toOpaque()
        on_roll = { context, file in
            guard let context, let file else { return }
            Unmanaged<ArchiveCallbacks>.fromOpaque(context).takeUnretainedValue().rolled(ArchivedFile(file.pointee))
        }
        on_roll_context = context
        if options.clock != nil {
            clock = { context in
                Unmanaged<ArchiveCallbacks>.fromOpaque(context!).takeUnretainedValue().clock!()
            }
            clock_context = context
        }
    }
}

extension LogBundle {
    /// Rolls the archive file being written now (when it holds anything): seals every thread's
    /// chunk, archives everything sealed and completes the file (``ArchiveOptions/onFileRolled``
    /// runs). Throws `ENOTSUP` when the bundle has no archiver.
    public func rollArchive() throws(LogbookError) {
        try check(lb_archive_roll(raw), .archiver, "lb_archive_roll", path: path)
    }

    /// Seals every thread's chunk and waits until all of it is archived and fsynced: what was
    /// logged before the call then survives power loss. Throws the archiver's error (e.g.
    /// `ENOSPC`), or `ETIMEDOUT`.
    public func syncArchive(timeout: Duration = .seconds(30)) throws(LogbookError) {
        try check(lb_archive_sync(raw, UInt32(clamping: wholeMilliseconds(timeout))), .archiver, "lb_archive_sync", path: path)
    }

    /// The archiver's statistics, or `nil` when the bundle has none.
    public var archiveStats: ArchiveStats? {
        var stats = lb_archive_stats()
        guard lb_archive_stats_get(raw, &stats) == 0 else { return nil }
        return ArchiveStats(stats)
    }

    /// Archive files as they complete, for as long as the bundle is open. Each call returns a new
    /// sequence that sees the files rolled from then on.
    public func rolledFiles() -> AsyncStream<ArchivedFile> {
        guard let archiveCallbacks else { return AsyncStream { $0.finish() } }
        return archiveCallbacks.stream()
    }
}

/// A duration in whole milliseconds for the C API, at least 1 (0 means "never" or "no limit" there).
private func wholeMilliseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    let (product, overflow) = seconds.multipliedReportingOverflow(by: 1000)
    if overflow || seconds < 0 { return seconds < 0 ? 1 : Int64.max }
    return max(1, product + attoseconds / 1_000_000_000_000_000)
}
