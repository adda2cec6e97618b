import Foundation
import Logbook
import LogbookUpload

/// Exports a bundle's (or archive directory's) records to a destination from a persisted cursor:
/// reads through `LogReader`'s stream, skips what the cursor says was acknowledged, sends batches
/// bounded in records and bytes, and saves the cursor as batches are acknowledged (the batches in
/// flight are saved before they are sent, so a killed exporter repeats at most those, counted).
///
/// The cursor holds a mark per chunk (`ExportCursor`). Marks of chunks the source no longer holds
/// are dropped after a read of everything the source holds: the first pass, and a pass after
/// `maximumMarks` marks were added since the last such read (it reads the whole source again, once). A bundle made again at the
/// same path (another ring: its creation time differs, in its ring header and in its archive
/// files' headers, so also when an archive directory or file is exported alone) starts the cursor over, reported in
/// `Report.startedOver`. Memory does not grow with the backlog: the records are decoded on a thread
/// of their own as the pass sends them (the reader's window, a few batches read ahead and the
/// batches in flight).
public final class Exporter {
    public struct Configuration: Sendable {
        /// A bundle, an archive directory or an archive file.
        public var source: String
        /// The cursor's name in `cursors` (one per destination).
        public var destinationName: String
        public var cursors: String
        public var maximumBatchRecords: Int
        public var maximumBatchBytes: Int

        /// Chunk marks added since the last read of the whole source before a pass reads it whole
        /// again, to drop the marks of chunks it no longer holds.
        public var maximumMarks: Int
        /// OTLP requests in flight at once (at least 1), over kept-alive connections. Batches are
        /// acknowledged in order only: the cursor moves over a prefix of acknowledged batches, so
        /// a kill repeats at most the batches in flight. Syslog sends one batch at a time (RELP
        /// keeps its own window of messages).
        public var requestsInFlight: Int

        public init(source: String, destinationName: String, cursors: String, maximumBatchRecords: Int = 512,
                    maximumBatchBytes: Int = 1 << 20, maximumMarks: Int = 4096, requestsInFlight: Int = 4) {
            self.requestsInFlight = max(1, requestsInFlight)
            self.source = source
            self.destinationName = destinationName
            self.cursors = cursors
            self.maximumBatchRecords = max(1, maximumBatchRecords)
            self.maximumBatchBytes = max(4096, maximumBatchBytes)
            self.maximumMarks = max(16, maximumMarks)
        }
    }

    /// What one pass did.
    public struct Report: Sendable, Equatable {
        public var exported = 0
        /// Records a collector refused in a partial success.
        public var rejected: Int64 = 0
        /// Records sent again after a restart (they were in the batch in flight when it stopped).
        public var repeated = 0
        /// Batches given up (a status not retried, or the policy's limits), with the reason; their
        /// records are not sent again.
        public var gaveUp: [String] = []
        /// The records in those batches (not sent again).
        public var recordsGivenUp = 0
        /// Syslog messages cut to the maximum size (with the marker).
        public var truncated = 0
        /// RELP messages sent again on a new session because the connection broke before their
        /// acknowledgement (the server may have taken them: possible repeats).
        public var resent = 0
        /// The source's records are of another ring than the cursor's (the bundle, or the bundle
        /// whose archive directory or file it is, was made again at the path): the cursor
        /// started over and everything the source holds was exported.
        public var startedOver = false
        /// Records of an overwrite ring destroyed before the exporter could read them: lost to the
        /// destination too. A pass that reads the whole source counts them by the ring's counters
        /// (what was written and is neither acknowledged by this cursor nor unreadable), so those
        /// destroyed between two runs, or before a new cursor's first read, are in it; a pass that
        /// reads what is new, by the reader's `overwrittenRecords`, its growth during the pass.
        public var overwritten: UInt64 = 0
        /// Records in archive files the archiver's retention deleted before the exporter could read
        /// them (counted as ``overwritten`` is, by a pass that reads the whole source).
        public var retired: UInt64 = 0
        /// Damage the reader found during this pass (`LogIssue` descriptions, without the records
        /// the overwrite policy destroyed: those are ``overwritten``): what it could not read is not
        /// exported.
        public var issues: [String] = []
        /// The records those issues account for (unreadable: damaged, cut short or missing).
        public var unreadable: UInt64 = 0

        public init() {}
    }

    /// What the exporter did since it was created (the sums of its passes' reports, with what a
    /// failed or cancelled pass did before it stopped), and its queue now.
    public struct Statistics: Sendable, Equatable {
        /// Passes that returned a report, and passes that threw.
        public var passes = 0
        public var failedPasses = 0
        /// Records the destination acknowledged.
        public var exported = 0
        /// Records a collector refused in a partial success (acknowledged all the same).
        public var rejected: Int64 = 0
        /// Records sent again after a restart.
        public var repeated = 0
        /// Batches given up, and the records in them (not sent again).
        public var batchesGivenUp = 0
        public var recordsGivenUp = 0
        /// Syslog messages cut to the maximum size; RELP messages sent again on a new session.
        public var truncated = 0
        public var resent = 0
        /// Records of an overwrite ring destroyed before the exporter could read them, and records
        /// in archive files retention deleted before it could read them.
        public var overwritten: UInt64 = 0
        public var retired: UInt64 = 0
        /// Damage the reader reported, and the records it accounts for (not exported).
        public var issues = 0
        public var unreadable: UInt64 = 0
        /// The queue: records the pass under way read (decoded, in memory) and has not settled
        /// (acknowledged or given up) yet; 0 between passes. The pass reads as it sends, so with
        /// a backlog this is the batches in flight and those read ahead, not the whole backlog.
        public var pending = 0
        /// The most records ``pending`` held at once: the exporter's memory in records, at most
        /// 2 × `requestsInFlight` + 3 batches whatever the backlog, each at most
        /// `maximumBatchRecords` records and about `maximumBatchBytes` bytes decoded.
        public var peakPending = 0

        public init() {}
    }

    /// A `Sendable` view of an exporter's ``Statistics``, for a task other than the one running
    /// its passes (a metrics poller, a health check): the exporter itself is not `Sendable`.
    public final class Monitor: Sendable {
        private let counters = Locked(Statistics())

        init() {}

        /// What the exporter did since it was created, and its queue now.
        public var statistics: Statistics { counters.withLock { $0 } }

        func update(_ body: (inout Statistics) -> Void) { counters.withLock(body) }
    }

    /// Where records go.
    public enum Sink: Sendable {
        case otlp(OTLPDestination, OTLPLogsEncoding)
        case syslog(SyslogDestination)
    }

    public let configuration: Configuration
    /// The exporter's statistics, readable from any task (see ``Monitor``).
    public let monitor = Monitor()
    private var sink: Sink
    private var reader: LogReader
    /// The next pass reads the source from the beginning (a new reader): the first one, and one
    /// after the marks grew past the bound.
    private var readsEverything = true
    private var startedOver = false
    /// What of the reader's issues and overwritten records earlier passes reported.
    private var issuesReported = 0
    private var overwrittenReported: UInt64 = 0
    private let store: ExportCursorStore
    private var cursor: ExportCursor
    /// The batch in flight when the last exporter stopped: sending its records again is a repeat.
    private var resumed: ExportCursor

    public convenience init(_ configuration: Configuration, otlp destination: OTLPDestination, encoding: OTLPLogsEncoding) throws {
        try self.init(configuration, sink: .otlp(destination, encoding))
    }

    public init(_ configuration: Configuration, sink: Sink) throws {
        self.configuration = configuration
        if case .otlp(var destination, let encoding) = sink {
            destination.contentType = encoding.format.contentType  // the bodies are the encoding's
            self.sink = .otlp(destination, encoding)
        } else {
            self.sink = sink
        }
        reader = try LogReader(path: configuration.source)
        store = try ExportCursorStore(path: configuration.cursors)
        try store.lock(configuration.destinationName)
        cursor = try store.load(configuration.destinationName)
        // Which ring the chunk sequences belong to: a bundle made again at the same path counts
        // its chunks from 1 again, so marks of the old one would hide the new one's records. An
        // archive directory or file exported alone names its ring in its files' headers.
        let ring = reader.ringCreatedNanoseconds() ?? 0
        if ring != 0 && cursor.ring != 0 && cursor.ring != ring {
            var fresh = ExportCursor()
            fresh.exported = cursor.exported
            fresh.exportedOfEarlierRings = cursor.exported
            fresh.repeated = cursor.repeated
            cursor = fresh
            startedOver = true
        }
        if ring != 0 { cursor.ring = ring }
        resumed = cursor
    }

    /// What the exporter did since it was created, and its queue now (``Monitor/statistics``).
    public var statistics: Statistics { monitor.statistics }

    /// Exports what the source holds now and was not acknowledged; returns what it did.
    public func exportAvailable() async throws -> Report {
        do {
            let report = try await exportPass()
            monitor.update { $0.passes += 1; $0.pending = 0 }
            return report
        } catch {
            monitor.update { $0.failedPasses += 1; $0.pending = 0 }
            throw error
        }
    }

    private func exportPass() async throws -> Report {
        var report = Report()
        report.startedOver = startedOver
        startedOver = false
        let wholeRead = readsEverything
        let freshCursor = cursor.exported == 0 && cursor.marks.isEmpty
        if wholeRead {
            reader = try LogReader(path: configuration.source)
            issuesReported = 0
            overwrittenReported = 0
        }
        // What the ring's counters say was written, read before the records are: a record the
        // read finds is then never counted lost (one written after is found, not counted).
        let counted = RingCounts(reader)
        // Until this pass ends as it should, the next one reads the whole source with a new
        // reader: this one counts as read what a stopped pass never settled.
        readsEverything = true
        let depth: Int
        if case .otlp = sink { depth = configuration.requestsInFlight } else { depth = 1 }
        // Records not exported yet are decoded on the stream's thread, a batch at a time; memory
        // is the reader's window, the batches waiting and those in flight, whatever the backlog.
        let monitor = monitor
        let stream = EntryStream(reader: reader, skipping: cursor, batchRecords: configuration.maximumBatchRecords,
                                 batchBytes: configuration.maximumBatchBytes, capacity: depth + 1) { records in
            monitor.update {
                $0.pending += records
                $0.peakPending = max($0.peakPending, $0.pending)
            }
        }
        defer { stream.stop() }
        var streamEnded = false
        // Decoded, not acknowledged, in order: the first `assigned` are in flight (`flights`, one
        // batch each, in the same order), the rest wait for a batch.
        var pending = EntryQueue()
        var assigned = 0
        var flights: [Flight] = []
        // Records per batch for the rest of this pass, halved by each 413 (the collector's limit).
        var recordLimit = configuration.maximumBatchRecords
        var repeatsCounted = 0  // leading pending records whose repeat was counted
        var unsaved = false     // an acknowledgement the cursor file does not have yet
        /// Takes the next batch from the stream when every record taken is in a batch in flight
        /// (a stream batch is bounded in records and bytes: so is what waits here).
        func fill() async throws {
            while !streamEnded && pending.count == assigned {
                guard let batch = try await stream.next() else {
                    streamEnded = true
                    break
                }
                if let names = batch.executables, case .otlp(let destination, var encoding) = sink, encoding.executableName == nil {
                    encoding.executableNames.merge(names) { $1 }
                    sink = .otlp(destination, encoding)
                }
                pending.append(batch.entries)
            }
        }
        /// Saves the cursor, with the batches in flight (`flights` and `starting`) as its in-flight
        /// extent: a journal entry of the marks changed since the last save (whole after a kill,
        /// which is what the in-flight extent is for), or now and then (``journalEntriesPerSnapshot``)
        /// a durable snapshot of the whole cursor.
        func save(with starting: [Flight] = [], durable: Bool = false) throws {
            var extent: [UInt64: UInt32] = [:]
            for flight in flights + starting {
                extent.merge(flight.extent) { max($0, $1) }
            }
            cursor.inFlight = extent
            if durable || journalEntries >= Self.journalEntriesPerSnapshot {
                try store.save(cursor, as: configuration.destinationName)
                journalEntries = 0
            } else {
                try store.append(cursor, changedChunks: changedChunks, as: configuration.destinationName)
                journalEntries += 1
            }
            changedChunks.removeAll(keepingCapacity: true)
            unsaved = false
        }
        /// A pass that is cancelled stops without acknowledging the batches under way (they stay
        /// in flight in the cursor: sent again by the next pass, counted as repeated).
        func stopIfCancelled() throws {
            if Task.isCancelled {
                for flight in flights { flight.task?.cancel() }
                try save(durable: true)
                throw ExportError.cancelled(report)
            }
        }
        /// The batch of the `count` records from `start` (records already assigned to a batch that
        /// went before, when a 413 splits it), encoded, not sent: it is saved in flight first.
        func prepare(from start: Int, count: Int) -> Flight {
            var end = count
            var body: [UInt8] = []
            if case .otlp(_, let encoding) = sink {
                body = encoding.encode(pending.slice(start, end), observedNanoseconds: Spool.wallClock())
                while body.count > configuration.maximumBatchBytes && end > 1 {  // halve until it fits
                    end /= 2
                    body = encoding.encode(pending.slice(start, end), observedNanoseconds: Spool.wallClock())
                }
            }
            // Counted once per record: a batch split after a 413 sends its records again.
            let fresh = max(0, start + end - max(start, repeatsCounted))
            let repeated = resumed.inFlight.isEmpty ? 0 : pending.slice(start + end - fresh, fresh).filter(resumed.wasInFlight).count
            repeatsCounted = max(repeatsCounted, start + end)
            report.repeated += repeated
            if repeated > 0 {
                // In the cursor at once (saved with this batch): a pass that is killed in its turn
                // keeps the count of what it sent again.
                cursor.repeated += UInt64(repeated)
                monitor.update { $0.repeated += repeated }
            }
            return Flight(count: end, body: body, extent: ExportCursor.extent(of: pending.slice(start, end)), task: nil)
        }
        /// Saves `starting` in flight, then sends them (OTLP; a syslog batch is sent when it is
        /// the head).
        func start(_ starting: [Flight]) throws -> [Flight] {
            try save(with: starting)
            guard case .otlp(let destination, _) = sink else { return starting }
            return starting.map { flight in
                var flight = flight
                let body = flight.body
                flight.task = Task { await destination.deliver(body) }
                flight.body = []
                return flight
            }
        }
        while true {
            try await fill()
            var starting: [Flight] = []
            while flights.count + starting.count < depth && assigned < pending.count {
                let flight = prepare(from: assigned, count: min(pending.count - assigned, recordLimit))
                starting.append(flight)
                assigned += flight.count
                try await fill()
            }
            if !starting.isEmpty {
                flights += try start(starting)
            } else if unsaved {
                try save()
            }
            if flights.isEmpty { break }
            let head = flights[0]  // in flight until it is settled (a cancelled pass saves it so)
            let batch = pending.slice(0, head.count)
            switch sink {
            case .otlp:
                let tasks = TaskList(flights.compactMap(\.task))
                let delivery = await withTaskCancellationHandler {
                    await head.task!.value
                } onCancel: {
                    tasks.cancelAll()
                }
                switch delivery {
                case .delivered(_, let rejected, _):
                    report.exported += batch.count
                    report.rejected += rejected
                    monitor.update { $0.exported += batch.count; $0.rejected += rejected }
                case .gaveUp(_, let reason):
                    try stopIfCancelled()
                    report.gaveUp.append(reason)
                    report.recordsGivenUp += batch.count
                    monitor.update { $0.batchesGivenUp += 1; $0.recordsGivenUp += batch.count }
                case .expired(let attempts):
                    report.gaveUp.append("expired after \(attempts) attempts")
                    report.recordsGivenUp += batch.count
                    monitor.update { $0.batchesGivenUp += 1; $0.recordsGivenUp += batch.count }
                case .tooLarge(_, let reason):
                    try stopIfCancelled()
                    if head.count > 1 {
                        // The same records again, in two batches half as large, before those in
                        // flight after them: nothing is acknowledged out of order.
                        recordLimit = max(1, min(recordLimit, head.count / 2))  // never larger again this pass
                        var again: [Flight] = [], covered = 0
                        while covered < head.count {
                            let flight = prepare(from: covered, count: min(recordLimit, head.count - covered))
                            again.append(flight)
                            covered += flight.count
                        }
                        flights.removeFirst()
                        flights.insert(contentsOf: try start(again), at: 0)
                        continue
                    }
                    report.gaveUp.append("a record alone is larger than the collector takes (\(head.bodyBytes) bytes): \(reason)")
                    report.recordsGivenUp += 1
                    monitor.update { $0.batchesGivenUp += 1; $0.recordsGivenUp += 1 }
                }
            case .syslog(let destination):
                switch await destination.deliver(batch) {
                case .delivered(_, let truncated, let resent):
                    report.exported += batch.count
                    report.truncated += truncated
                    report.resent += resent
                    monitor.update { $0.exported += batch.count; $0.truncated += truncated; $0.resent += resent }
                case .gaveUp(_, let reason):
                    try stopIfCancelled()
                    report.gaveUp.append(reason)
                    report.recordsGivenUp += batch.count
                    monitor.update { $0.batchesGivenUp += 1; $0.recordsGivenUp += batch.count }
                case .unusable(let reason):
                    // nothing acknowledged and nothing skipped: the batch waits for a usable destination
                    flights = []
                    try save(durable: true)
                    throw ExportError.unusableDestination(reason)
                }
            }
            flights.removeFirst()
            cursor.acknowledge(batch)
            changedChunks.formUnion(head.extent.keys)
            pending.removeFirst(head.count)
            assigned -= head.count
            repeatsCounted = max(0, repeatsCounted - head.count)
            unsaved = true  // saved with the next batches started, or before the next wait
            monitor.update { $0.pending = max(0, $0.pending - batch.count) }
        }
        // The read ended and everything it handed over is settled: the reader is the pass's again.
        var verified: VerifySummary?
        if wholeRead {
            countsMoved = 0..<0
            // What needs the whole source (missing archive files, records overwritten or lost by
            // the bundle's own counts) becomes issues: checked on each whole read.
            let before = reader.issues.count
            verified = try? reader.verify()
            if counted?.writerAlive == true && verified?.writerAlive == false {
                // The writer stopped during the read: verify took it for a read of the stopped
                // writer's records and compared the ring's counts with one that began before
                // most of them (an outside run: "724 records are missing", all exported by the
                // passes after). Those issues are not reported; what is lost is counted below.
                countsMoved = before..<reader.issues.count
            }
            // Everything the source holds was read: marks of chunks below the oldest are of nothing.
            if stream.oldestChunk != .max { cursor.forget(below: stream.oldestChunk) }
        }
        let issues = reader.issues
        // Records the overwrite policy destroyed are counted in `overwritten`, not as damage.
        let newIssues = issues.indices.dropFirst(issuesReported).filter { isDamage(issues, $0) }.map { issues[$0] }
        report.issues = newIssues.map(\.description)
        // A large record whose beginning the policy destroyed is in the reader's overwritten count.
        report.unreadable = newIssues.filter { !$0.isBeginningOverwritten }.reduce(0) { $0 + $1.records }
        issuesReported = issues.count
        let overwritten = reader.overwrittenRecords
        if let counted, let verified, verified.accounted || verified.writerAlive {
            // Everything the source holds was read: what the ring's counters say was written and
            // this cursor neither acknowledged nor found unreadable is gone, whenever it went (a
            // writer reopened in between or not). The reader's count of this pass is in it.
            countLosses(written: counted, unreadable: report.unreadable, into: &report)
        } else {
            report.overwritten = overwritten > overwrittenReported ? overwritten - overwrittenReported : 0
            if wholeRead && freshCursor {
                // No counters to go by (archive files alone, or counters that cannot be true):
                // before this cursor's first read, by the bundle's own counts (verify). (A record
                // whose beginning was overwritten is in the reader's count already.)
                report.overwritten += issues.filter { $0.kind == .overwritten && !$0.isBeginningOverwritten }
                    .reduce(0) { $0 + $1.records }
            }
            cursor.lostOverwritten? += report.overwritten
        }
        overwrittenReported = max(overwrittenReported, overwritten)
        if wholeRead { retiredAtWholeRead = counted?.retired ?? 0 }
        let lossesUnexplained = !wholeRead && counted.map { retentionLeftRecordsUnexplained(by: $0, issues: issues) } ?? false
        monitor.update { [report] in
            $0.issues += report.issues.count
            $0.unreadable += report.unreadable
            $0.overwritten += report.overwritten
            $0.retired += report.retired
        }
        resumed.inFlight = [:]
        try save(durable: true)
        if wholeRead { marksAfterWholeRead = cursor.marks.count }
        // Read whole again once `maximumMarks` marks were added since (a source of many chunks
        // is not read whole on every pass), or to count what retention deleted unread.
        readsEverything = cursor.marks.count > marksAfterWholeRead + configuration.maximumMarks || lossesUnexplained
        return report
    }

    /// After a pass that read what is new (a follower's): whether retention deleted archive files
    /// since the last whole read and the ring's counters say more records were written than this
    /// cursor acknowledged, found unreadable or reported lost. The reader counts no record of a
    /// file deleted before it reached it (it knows nothing of what it never listed): the next
    /// pass reads the whole source, which counts them (``countLosses``). A follower that keeps
    /// up explains every record, so it never reads whole for this.
    private func retentionLeftRecordsUnexplained(by counted: RingCounts, issues: [LogIssue]) -> Bool {
        guard counted.retired > retiredAtWholeRead else { return false }
        let unreadable = issues.indices.filter { isDamage(issues, $0) && !issues[$0].isBeginningOverwritten }.reduce(0) { $0 + issues[$1].records }
        let explained = cursor.exportedOfThisRing + unreadable + (cursor.lostOverwritten ?? 0) + (cursor.lostRetired ?? 0)
        return counted.records > explained
    }

    /// The ring's count of records retention deleted, at the last whole read.
    private var retiredAtWholeRead: UInt64 = 0
    /// The issues verify added on the last whole read, when the writer stopped during it: its
    /// comparison of the ring's counts with the read is not reported.
    private var countsMoved = 0..<0

    /// Whether the reader's issue at `index` is damage to report: not records the overwrite policy
    /// destroyed (``Report/overwritten``), nor verify's comparison of counts that moved.
    private func isDamage(_ issues: [LogIssue], _ index: Int) -> Bool {
        let issue = issues[index]
        return issue.kind != .overwritten && !(countsMoved.contains(index) && issue.kind == .missing && issue.file == "ring")
    }

    /// After a read of the whole source: the records of this ring lost to the destination are
    /// those `written` (the ring's counters before the read) less those this cursor acknowledged
    /// and those the read found unreadable. What is more than the cursor reported lost is lost
    /// since (between two runs too, across a writer's reopen: the counters are the ring's, never
    /// reset): reported, as overwritten or retired. A count that lags (a live writer) is made up
    /// by the next such read; it never counts a record the read found.
    private func countLosses(written counted: RingCounts, unreadable: UInt64, into report: inout Report) {
        let accounted = cursor.exportedOfThisRing + unreadable
        let lost = counted.records > accounted ? counted.records - accounted : 0
        guard let lostOverwritten = cursor.lostOverwritten, let lostRetired = cursor.lostRetired else {
            // Saved by a version that did not count them: what is lost now is taken as reported.
            let overwritten = counted.share(ofOverwritten: lost, reported: 0)
            cursor.lostOverwritten = overwritten
            cursor.lostRetired = lost - overwritten
            return
        }
        let reported = lostOverwritten + lostRetired
        guard lost > reported else { return }
        let overwritten = counted.share(ofOverwritten: lost - reported, reported: lostOverwritten)
        report.overwritten = overwritten
        report.retired = lost - reported - overwritten
        cursor.lostOverwritten = lostOverwritten + report.overwritten
        cursor.lostRetired = lostRetired + report.retired
    }

    /// A ring's counters: records written (sealed, and in active chunks), and the records the
    /// overwrite policy destroyed unarchived and retention deleted in archive files.
    private struct RingCounts {
        let records: UInt64
        let overwritten: UInt64
        let retired: UInt64
        let writerAlive: Bool

        /// nil for archive files read alone (no ring) or a ring header that does not read.
        init?(_ reader: LogReader) {
            guard let info = try? reader.info() else { return nil }
            records = info.counters.records
            overwritten = info.recordsOverwritten
            retired = info.archive.retiredRecords
            writerAlive = info.writerAlive
        }

        /// Of `lost` records newly lost, those overwritten: all of them without retention, none
        /// in a ring never overwritten; with both, as many as the ring's count of overwritten
        /// records leaves beyond those `reported` overwritten (the records of a chunk overwritten
        /// unarchived were never in an archive file), the rest retired.
        func share(ofOverwritten lost: UInt64, reported: UInt64) -> UInt64 {
            if retired == 0 { return lost }
            if overwritten == 0 { return 0 }
            return min(lost, overwritten > reported ? overwritten - reported : 0)
        }
    }

    /// Journal entries (one per acknowledged batch, about) between two durable snapshots of the
    /// cursor: a power loss sends again at most the batches of this many, not counted as repeats.
    static let journalEntriesPerSnapshot = 64
    /// The marks the cursor held after the last whole read dropped those of chunks gone.
    private var marksAfterWholeRead = 0
    /// Journal entries since the last snapshot; the first save of an exporter is a snapshot.
    private var journalEntries = Int.max
    /// Chunks whose marks changed since the last save (what its journal entry holds).
    private var changedChunks: Set<UInt64> = []

    /// The cursor as saved (for reports and tests).
    public var savedCursor: ExportCursor { cursor }

    /// A batch in flight: its records (the next `count` of the pending ones), its body (until it is
    /// sent) and how many bytes that was, the highest offset per chunk of its records, and its
    /// delivery (OTLP; nil for syslog, delivered when it is the head).
    private struct Flight {
        let count: Int
        var body: [UInt8]
        let bodyBytes: Int
        let extent: [UInt64: UInt32]
        var task: Task<OTLPDestination.Delivery, Never>?

        init(count: Int, body: [UInt8], extent: [UInt64: UInt32], task: Task<OTLPDestination.Delivery, Never>?) {
            self.count = count
            self.body = body
            bodyBytes = body.count
            self.extent = extent
            self.task = task
        }
    }

    /// The deliveries a cancelled pass cancels.
    private struct TaskList: Sendable {
        let tasks: [Task<OTLPDestination.Delivery, Never>]
        init(_ tasks: [Task<OTLPDestination.Delivery, Never>]) { self.tasks = tasks }
        func cancelAll() { for task in tasks { task.cancel() } }
    }
}

public enum ExportError: Error, CustomStringConvertible {
    /// The destination cannot take the records as configured; the cursor did not move.
    case unusableDestination(String)
    /// The pass was cancelled while a batch was being delivered: what it did until then (the
    /// batch under way stays in flight: the next pass sends it again, counted as repeated).
    case cancelled(Exporter.Report)

    public var description: String {
        switch self {
        case .unusableDestination(let why): why
        case .cancelled(let report): "cancelled after \(report.exported) records"
        }
    }
}
