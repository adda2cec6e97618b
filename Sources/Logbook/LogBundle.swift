import CLogbook

/// How a full ring makes room for new records.
public enum WrapPolicy: UInt32, Sendable {
    /// Reuse the oldest sealed chunk: a flight recorder that keeps the newest records.
    case overwrite = 1  // LB_WRAP_OVERWRITE
    /// Reuse only chunks the archiver has persisted. Until an archiver runs, a full lossless ring
    /// takes no more records: they are dropped and counted as `no_chunk`, and nothing is overwritten.
    case lossless = 2   // LB_WRAP_LOSSLESS
}

/// Counters of a bundle: what was written and what was dropped, by reason.
public struct LogCounters: Sendable, Equatable {
    public var records: UInt64
    public var bytes: UInt64
    public var chunksClaimed: UInt64
    public var chunksReused: UInt64
    public var largeRecords: UInt64
    /// Dropped records by reason (`too_large`, `no_chunk`, `reentrant`, `closed`, `meta`).
    public var drops: [String: UInt64]
    public var dropped: UInt64 { drops.values.reduce(0, +) }

    init(_ c: lb_counters) {
        records = c.records
        bytes = c.bytes
        chunksClaimed = c.chunks_claimed
        chunksReused = c.chunks_reused
        largeRecords = c.large_records
        var drops: [String: UInt64] = [:]
        withUnsafeBytes(of: c.drops) { raw in
            for (index, count) in raw.bindMemory(to: UInt64.self).enumerated() {
                drops[String(cString: lb_drop_reason_name(UInt32(index)))] = count
            }
        }
        self.drops = drops
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

    /// Opens (or creates) the bundle at `path`.
    /// - Parameters:
    ///   - capacity: ring bytes, used when the bundle is created (an existing bundle keeps its size).
    ///   - chunkSize: bytes per chunk, a power of two from 4 KiB to 16 MiB.
    ///   - wrapPolicy: what happens when the ring is full.
    ///   - idleSealMilliseconds: seal a chunk whose thread has been idle this long (0: never).
    public init(
        path: String,
        capacity: Int = 16 << 20,
        chunkSize: Int = 64 << 10,
        wrapPolicy: WrapPolicy = .overwrite,
        idleSealMilliseconds: Int = 1000
    ) throws(LogbookError) {
        var options = lb_options()
        lb_options_init(&options)
        options.capacity = UInt64(max(0, capacity))
        options.chunk_size = UInt32(clamping: chunkSize)
        options.wrap_policy = wrapPolicy.rawValue
        options.idle_seal_ms = UInt32(clamping: idleSealMilliseconds)
        var bundle: OpaquePointer?
        try check(lb_bundle_open(path, &options, &bundle), "lb_bundle_open", path: path)
        raw = bundle!
        self.path = path
    }

    deinit {
        lb_bundle_close(raw)
    }

    /// The C bundle (`lb_bundle *`) behind this one, for C code in the same program. Valid while
    /// this object lives.
    public var cBundle: OpaquePointer { raw }

    /// The logger with this name (created on first use; the same control for every call).
    public func logger(_ name: String) throws(LogbookError) -> Logger {
        var control: UnsafeMutablePointer<lb_logger>?
        try check(lb_logger_register(raw, name, &control), "lb_logger_register", path: path)
        return Logger(bundle: self, control: control!)
    }

    /// Seals every thread's open chunk so readers see it complete, and schedules writeback.
    public func flush() throws(LogbookError) {
        try check(lb_bundle_flush(raw), "lb_bundle_flush", path: path)
    }

    /// Seals all chunks and releases the writer lock. Later log calls are dropped.
    public func close() throws(LogbookError) {
        try check(lb_bundle_shutdown(raw), "lb_bundle_shutdown", path: path)
    }

    /// What has been written and dropped so far.
    public var counters: LogCounters {
        var c = lb_counters()
        lb_bundle_counters(raw, &c)
        return LogCounters(c)
    }
}
