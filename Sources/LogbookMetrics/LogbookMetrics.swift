import Logbook
import LogbookExport
import LogbookUpload
import Metrics

/// Reports the health of a bundle (its writers, ring and archiver) and, optionally, of uploaders
/// and exporters through swift-metrics, by polling their counters.
///
/// ```swift
/// let reporter = LogbookMetricsReporter(bundle: bundle, interval: .seconds(10),
///                                       dimensions: [("service", "api")])
/// let polling = Task { await reporter.run() }   // or in a ServiceGroup: see run()
/// ```
///
/// Nothing runs on the logging path: every number is read by ``poll()`` from counters that Logbook
/// keeps anyway (`LogBundle.counters`, `LogBundle.ringUsage`, `LogBundle.archiveStats`,
/// `Uploader.statistics`, `Exporter.Monitor.statistics`). A poll costs a pass over the ring's
/// chunk headers (two with an archiver) and a lock per uploader and exporter.
///
/// Counters follow the cumulative counts of their source: each poll adds what the count grew by
/// since the previous one. They count from the reporter's creation: a bundle's own counters also
/// hold the records of earlier processes that wrote it. Gauges are levels, set at each poll.
///
/// Labels (with the default prefix `logbook`; every metric also carries the `dimensions` given):
///
/// | Label | Kind | Dimensions | What |
/// |---|---|---|---|
/// | `logbook_records_total` | counter | | records written |
/// | `logbook_record_bytes_total` | counter | | their bytes |
/// | `logbook_large_records_total` | counter | | records written as fragments (larger than a chunk) |
/// | `logbook_chunks_claimed_total` | counter | | chunks claimed by writing threads |
/// | `logbook_chunks_reused_total` | counter | | claims that overwrote an older chunk |
/// | `logbook_dropped_records_total` | counter | `reason` | records dropped: `too_large`, `no_chunk`, `reentrant`, `closed`, `meta`, `ring_full` |
/// | `logbook_ring_capacity_bytes` | gauge | | the ring's size |
/// | `logbook_ring_bytes_in_use` | gauge | | bytes the ring's chunks hold (`RingUsage.bytesInUse`) |
/// | `logbook_ring_chunks` | gauge | `state` | chunks by state: `free`, `active`, `sealed`, `archiving`, `archived` |
///
/// With an archiver (bundles opened with `ArchiveOptions`; after `LogBundle.close()` these
/// keep their last values):
///
/// | Label | Kind | What |
/// |---|---|---|
/// | `logbook_archive_lag_chunks`, `logbook_archive_lag_bytes` | gauge | sealed, not archived yet |
/// | `logbook_archive_files`, `logbook_archive_directory_bytes` | gauge | complete archive files and the bytes of all files |
/// | `logbook_archive_compression_pending_files` | gauge | files waiting for compression |
/// | `logbook_archive_last_error` | gauge | errno of the last failure, 0 after a success |
/// | `logbook_archive_chunks_total`, `logbook_archive_bytes_total` | counter | chunks and bytes archived |
/// | `logbook_archive_files_rolled_total`, `logbook_archive_files_deleted_total` | counter | files completed, and deleted by retention |
/// | `logbook_archive_failures_total` | counter | failed archive operations (writes, fsyncs, renames, deletions) |
/// | `logbook_archive_files_compressed_total`, `logbook_archive_compression_failures_total` | counter | |
/// | `logbook_archive_compression_input_bytes_total`, `logbook_archive_compression_output_bytes_total` | counter | bytes of compressed files, before and after |
///
/// Per uploader (dimension `uploader`: the name it was given):
///
/// | Label | Kind | What |
/// |---|---|---|
/// | `logbook_upload_pending_items`, `logbook_upload_pending_bytes` | gauge | the spool's queue |
/// | `logbook_upload_in_flight` | gauge | items being uploaded |
/// | `logbook_upload_outcomes_total` | counter | items settled, by `outcome`: `delivered`, `gave_up`, `expired`, `dropped`, `quarantined`, `not_submitted` |
/// | `logbook_upload_delivered_bytes_total` | counter | bytes delivered |
/// | `logbook_upload_attempts_total`, `logbook_upload_failed_attempts_total` | counter | HTTP attempts, and those that did not deliver |
///
/// Per exporter (dimension `destination`: its `Exporter.Configuration.destinationName`):
///
/// | Label | Kind | What |
/// |---|---|---|
/// | `logbook_export_pending_records` | gauge | records the pass under way has still to settle |
/// | `logbook_export_records_total` | counter | records the destination acknowledged |
/// | `logbook_export_rejected_records_total` | counter | of those, refused by a collector (partial success) |
/// | `logbook_export_repeated_records_total` | counter | sent again after a restart |
/// | `logbook_export_gave_up_batches_total`, `logbook_export_gave_up_records_total` | counter | batches given up and their records |
/// | `logbook_export_overwritten_records_total` | counter | destroyed by an overwrite ring before they were read |
/// | `logbook_export_retired_records_total` | counter | in archive files retention deleted before they were read |
/// | `logbook_export_truncated_total`, `logbook_export_resent_total` | counter | syslog messages cut; RELP messages sent again |
/// | `logbook_export_issues_total` | counter | damage the reader reported |
/// | `logbook_export_passes_total`, `logbook_export_failed_passes_total` | counter | passes completed, and passes that threw |
public final class LogbookMetricsReporter: Sendable {
    /// The time between two polls of ``run()``.
    public let interval: Duration
    /// The start of every label (`logbook` by default); `""` for none.
    public let labelPrefix: String

    private let bundle: LogBundle
    private let uploaders: [(name: String, uploader: Uploader)]
    private let exporters: [(name: String, monitor: Exporter.Monitor)]
    private let instruments: Locked<Instruments>

    /// Registers the instruments (creating them in `factory`) and takes the counters' baselines;
    /// nothing is reported before the first ``poll()``.
    /// - Parameters:
    ///   - bundle: the bundle to report on (kept alive by the reporter).
    ///   - uploaders: uploaders to report on, by the name that the `uploader` dimension carries.
    ///   - exporters: exporters to report on (dimension `destination`: their destination name);
    ///     only their `Exporter.monitor` is kept, so the exporters go on running elsewhere.
    ///   - interval: the time between polls of ``run()``, at least a millisecond.
    ///   - labelPrefix: the start of every label, joined to the rest by `_`.
    ///   - dimensions: added to every metric (e.g. `[("service", "api")]`).
    ///   - factory: where the instruments are made: the bootstrapped `MetricsSystem` by default,
    ///     or any `MetricsFactory` (e.g. `TestMetrics` in tests).
    public init(
        bundle: LogBundle,
        uploaders: [String: Uploader] = [:],
        exporters: [Exporter] = [],
        interval: Duration = .seconds(10),
        labelPrefix: String = "logbook",
        dimensions: [(String, String)] = [],
        factory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.bundle = bundle
        self.uploaders = uploaders.sorted { $0.key < $1.key }.map { (name: $0.key, uploader: $0.value) }
        self.exporters = exporters.map { (name: $0.configuration.destinationName, monitor: $0.monitor) }
        self.interval = max(interval, .milliseconds(1))
        self.labelPrefix = labelPrefix
        let make = InstrumentMaker(prefix: labelPrefix, dimensions: dimensions, factory: factory)
        instruments = Locked(Instruments(
            bundle: BundleInstruments(make, bundle: bundle),
            archive: bundle.archiveStats.map { ArchiveInstruments(make, stats: $0) },
            uploaders: self.uploaders.map { UploaderInstruments(make, name: $0.name, statistics: $0.uploader.statistics) },
            exporters: self.exporters.map { ExporterInstruments(make, name: $0.name, statistics: $0.monitor.statistics) }
        ))
    }

    /// Takes one sample of every source and reports it: counters grow by what their sources
    /// counted since the previous poll, gauges are set. Safe from any thread, also while
    /// ``run()`` polls.
    public func poll() {
        // Read outside the lock: the sources take their own locks and scan the ring.
        let counters = bundle.counters
        let usage = bundle.ringUsage
        let archive = bundle.archiveStats
        let uploads = uploaders.map { $0.uploader.statistics }
        let exports = exporters.map { $0.monitor.statistics }
        instruments.withLock { instruments in
            instruments.bundle.report(counters, usage)
            if let archive { instruments.archive?.report(archive) }
            for (index, statistics) in uploads.enumerated() { instruments.uploaders[index].report(statistics) }
            for (index, statistics) in exports.enumerated() { instruments.exporters[index].report(statistics) }
        }
    }

    /// Polls every ``interval`` (the first time at once) until the task is cancelled, then polls a
    /// last time and returns. Run it in a `Task` of its own, or in a swift-service-lifecycle
    /// `ServiceGroup`: it has the `run()` of `Service` (`extension LogbookMetricsReporter:
    /// Service {}` conforms it), but it does not know of graceful shutdown, which does not cancel
    /// a service: call it as `await cancelWhenGracefulShutdown { await reporter.run() }` from a
    /// service's `run()`, or the group waits for it.
    public func run() async {
        let clock = ContinuousClock()
        var next = clock.now
        while !Task.isCancelled {
            poll()
            next = next.advanced(by: interval)
            let now = clock.now
            if next < now { next = now.advanced(by: interval) }  // after a stall: no burst of polls
            do {
                try await Task.sleep(until: next, clock: clock)
            } catch {
                break
            }
        }
        poll()
    }
}

// MARK: instruments

/// Makes the instruments of one reporter: its prefix, dimensions and factory.
private struct InstrumentMaker {
    let prefix: String
    let dimensions: [(String, String)]
    let factory: any MetricsFactory

    func label(_ name: String) -> String { prefix.isEmpty ? name : prefix + "_" + name }

    func counter(_ name: String, _ extra: [(String, String)] = [], from value: UInt64) -> FollowedCounter {
        FollowedCounter(counter: Counter(label: label(name), dimensions: dimensions + extra, factory: factory), last: value)
    }

    func gauge(_ name: String, _ extra: [(String, String)] = []) -> Gauge {
        Gauge(label: label(name), dimensions: dimensions + extra, factory: factory)
    }
}

/// A counter that follows a cumulative count: each poll adds what the count grew by.
private struct FollowedCounter {
    let counter: Counter
    var last: UInt64

    mutating func follow(_ value: UInt64) {
        // A count never goes back; if one did (a source started over), it is followed from there
        // rather than counted twice.
        if value > last { counter.increment(by: Int64(clamping: value - last)) }
        last = value
    }
}

private extension FollowedCounter {
    mutating func follow<T: BinaryInteger>(_ value: T) { follow(UInt64(clamping: value)) }
}

private struct Instruments {
    var bundle: BundleInstruments
    var archive: ArchiveInstruments?
    var uploaders: [UploaderInstruments]
    var exporters: [ExporterInstruments]
}

private struct BundleInstruments {
    var records, bytes, largeRecords, chunksClaimed, chunksReused: FollowedCounter
    var drops: [(reason: DropReason, counter: FollowedCounter)]
    let capacity, bytesInUse: Gauge
    let chunks: (free: Gauge, active: Gauge, sealed: Gauge, archiving: Gauge, archived: Gauge)

    init(_ make: InstrumentMaker, bundle: LogBundle) {
        let c = bundle.counters
        records = make.counter("records_total", from: c.records)
        bytes = make.counter("record_bytes_total", from: c.bytes)
        largeRecords = make.counter("large_records_total", from: c.largeRecords)
        chunksClaimed = make.counter("chunks_claimed_total", from: c.chunksClaimed)
        chunksReused = make.counter("chunks_reused_total", from: c.chunksReused)
        drops = c.drops.keys.sorted { $0.rawValue < $1.rawValue }.map { reason in
            (reason, make.counter("dropped_records_total", [("reason", reason.rawValue)], from: c.drops[reason] ?? 0))
        }
        capacity = make.gauge("ring_capacity_bytes")
        bytesInUse = make.gauge("ring_bytes_in_use")
        func chunks(_ state: String) -> Gauge { make.gauge("ring_chunks", [("state", state)]) }
        self.chunks = (chunks("free"), chunks("active"), chunks("sealed"), chunks("archiving"), chunks("archived"))
    }

    mutating func report(_ c: LogCounters, _ usage: RingUsage) {
        records.follow(c.records)
        bytes.follow(c.bytes)
        largeRecords.follow(c.largeRecords)
        chunksClaimed.follow(c.chunksClaimed)
        chunksReused.follow(c.chunksReused)
        for index in drops.indices { drops[index].counter.follow(c.drops[drops[index].reason] ?? 0) }
        capacity.record(usage.capacity)
        bytesInUse.record(usage.bytesInUse)
        chunks.free.record(usage.freeChunks)
        chunks.active.record(usage.activeChunks)
        chunks.sealed.record(usage.sealedChunks)
        chunks.archiving.record(usage.archivingChunks)
        chunks.archived.record(usage.archivedChunks)
    }
}

private struct ArchiveInstruments {
    let lagChunks, lagBytes, files, directoryBytes, compressionPending, lastError: Gauge
    var chunks, bytes, filesRolled, filesDeleted, failures: FollowedCounter
    var filesCompressed, compressionFailures, bytesBeforeCompression, bytesAfterCompression: FollowedCounter

    init(_ make: InstrumentMaker, stats s: ArchiveStats) {
        lagChunks = make.gauge("archive_lag_chunks")
        lagBytes = make.gauge("archive_lag_bytes")
        files = make.gauge("archive_files")
        directoryBytes = make.gauge("archive_directory_bytes")
        compressionPending = make.gauge("archive_compression_pending_files")
        lastError = make.gauge("archive_last_error")
        chunks = make.counter("archive_chunks_total", from: s.chunksArchived)
        bytes = make.counter("archive_bytes_total", from: s.bytesArchived)
        filesRolled = make.counter("archive_files_rolled_total", from: s.filesRolled)
        filesDeleted = make.counter("archive_files_deleted_total", from: s.filesDeleted)
        failures = make.counter("archive_failures_total", from: s.failures)
        filesCompressed = make.counter("archive_files_compressed_total", from: s.filesCompressed)
        compressionFailures = make.counter("archive_compression_failures_total", from: s.compressionFailures)
        bytesBeforeCompression = make.counter("archive_compression_input_bytes_total", from: s.bytesBeforeCompression)
        bytesAfterCompression = make.counter("archive_compression_output_bytes_total", from: s.bytesAfterCompression)
    }

    mutating func report(_ s: ArchiveStats) {
        lagChunks.record(s.lagChunks)
        lagBytes.record(s.lagBytes)
        files.record(s.files)
        directoryBytes.record(s.directoryBytes)
        compressionPending.record(s.compressionPending)
        lastError.record(s.lastError)
        chunks.follow(s.chunksArchived)
        bytes.follow(s.bytesArchived)
        filesRolled.follow(s.filesRolled)
        filesDeleted.follow(s.filesDeleted)
        failures.follow(s.failures)
        filesCompressed.follow(s.filesCompressed)
        compressionFailures.follow(s.compressionFailures)
        bytesBeforeCompression.follow(s.bytesBeforeCompression)
        bytesAfterCompression.follow(s.bytesAfterCompression)
    }
}

private struct UploaderInstruments {
    let pendingItems, pendingBytes, inFlight: Gauge
    var delivered, gaveUp, expired, dropped, quarantined, notSubmitted: FollowedCounter
    var deliveredBytes, attempts, failedAttempts: FollowedCounter

    init(_ make: InstrumentMaker, name: String, statistics s: Uploader.Statistics) {
        let uploader = [("uploader", name)]
        pendingItems = make.gauge("upload_pending_items", uploader)
        pendingBytes = make.gauge("upload_pending_bytes", uploader)
        inFlight = make.gauge("upload_in_flight", uploader)
        func outcome(_ outcome: String, _ value: Int) -> FollowedCounter {
            make.counter("upload_outcomes_total", uploader + [("outcome", outcome)], from: UInt64(clamping: value))
        }
        delivered = outcome("delivered", s.delivered)
        gaveUp = outcome("gave_up", s.gaveUp)
        expired = outcome("expired", s.expired)
        dropped = outcome("dropped", s.dropped)
        quarantined = outcome("quarantined", s.quarantined)
        notSubmitted = outcome("not_submitted", s.notSubmitted)
        deliveredBytes = make.counter("upload_delivered_bytes_total", uploader, from: UInt64(clamping: s.deliveredBytes))
        attempts = make.counter("upload_attempts_total", uploader, from: UInt64(clamping: s.attempts))
        failedAttempts = make.counter("upload_failed_attempts_total", uploader, from: UInt64(clamping: s.failedAttempts))
    }

    mutating func report(_ s: Uploader.Statistics) {
        pendingItems.record(s.pendingItems)
        pendingBytes.record(s.pendingBytes)
        inFlight.record(s.uploading)
        delivered.follow(s.delivered)
        gaveUp.follow(s.gaveUp)
        expired.follow(s.expired)
        dropped.follow(s.dropped)
        quarantined.follow(s.quarantined)
        notSubmitted.follow(s.notSubmitted)
        deliveredBytes.follow(s.deliveredBytes)
        attempts.follow(s.attempts)
        failedAttempts.follow(s.failedAttempts)
    }
}

private struct ExporterInstruments {
    let pending: Gauge
    var exported, rejected, repeated, batchesGivenUp, recordsGivenUp, overwritten, retired: FollowedCounter
    var truncated, resent, issues, passes, failedPasses: FollowedCounter

    init(_ make: InstrumentMaker, name: String, statistics s: Exporter.Statistics) {
        let destination = [("destination", name)]
        func counter<T: BinaryInteger>(_ label: String, _ value: T) -> FollowedCounter {
            make.counter(label, destination, from: UInt64(clamping: value))
        }
        pending = make.gauge("export_pending_records", destination)
        exported = counter("export_records_total", s.exported)
        rejected = counter("export_rejected_records_total", s.rejected)
        repeated = counter("export_repeated_records_total", s.repeated)
        batchesGivenUp = counter("export_gave_up_batches_total", s.batchesGivenUp)
        recordsGivenUp = counter("export_gave_up_records_total", s.recordsGivenUp)
        overwritten = counter("export_overwritten_records_total", s.overwritten)
        retired = counter("export_retired_records_total", s.retired)
        truncated = counter("export_truncated_total", s.truncated)
        resent = counter("export_resent_total", s.resent)
        issues = counter("export_issues_total", s.issues)
        passes = counter("export_passes_total", s.passes)
        failedPasses = counter("export_failed_passes_total", s.failedPasses)
    }

    mutating func report(_ s: Exporter.Statistics) {
        pending.record(s.pending)
        exported.follow(s.exported)
        rejected.follow(s.rejected)
        repeated.follow(s.repeated)
        batchesGivenUp.follow(s.batchesGivenUp)
        recordsGivenUp.follow(s.recordsGivenUp)
        overwritten.follow(s.overwritten)
        retired.follow(s.retired)
        truncated.follow(s.truncated)
        resent.follow(s.resent)
        issues.follow(s.issues)
        passes.follow(s.passes)
        failedPasses.follow(s.failedPasses)
    }
}
