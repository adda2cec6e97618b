import Foundation
import Logbook
import LogbookUpload

/// Exports a bundle's (or archive directory's) records to a destination from a persisted cursor:
/// reads through `LogReader`, skips what the cursor says was acknowledged, sends batches bounded
/// in records and bytes, and saves the cursor after each acknowledged batch (the batch in flight
/// is saved before it is sent, so a killed exporter repeats at most that batch, counted).
///
/// The cursor holds a mark per chunk (`ExportCursor`). Marks of chunks the source no longer holds
/// are dropped after a read of everything the source holds: the first pass, and a pass after the
/// marks passed `maximumMarks` (it reads the whole source again, once). A bundle made again at the
/// same path (another ring: its creation time differs) starts the cursor over, reported in
/// `Report.startedOver`. Memory: the reader holds what is new since the last pass (undecoded, about
/// 110 bytes a record), and one batch is decoded at a time.
public final class Exporter {
    public struct Configuration: Sendable {
        /// A bundle, an archive directory or an archive file.
        public var source: String
        /// The cursor's name in `cursors` (one per destination).
        public var destinationName: String
        public var cursors: String
        public var maximumBatchRecords: Int
        public var maximumBatchBytes: Int

        /// Chunk marks kept before a pass reads the whole source to drop those of chunks it no
        /// longer holds.
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
        /// The bundle at the source's path is another one than the cursor's (made again): the
        /// cursor started over and everything it holds was exported.
        public var startedOver = false
        /// Records of an overwrite ring destroyed before the exporter could read them (the reader's
        /// `overwrittenRecords`, its growth during this pass): lost to the destination too.
        public var overwritten: UInt64 = 0
        /// Damage the reader found during this pass (`LogIssue` descriptions): what it could not
        /// read is not exported.
        public var issues: [String] = []

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
        /// Records of an overwrite ring destroyed before the exporter could read them.
        public var overwritten: UInt64 = 0
        /// Damage the reader reported.
        public var issues = 0
        /// The queue: records the pass under way found to send and has not settled (acknowledged
        /// or given up) yet; 0 between passes. Records written since that pass began are not in
        /// it: the next pass finds them.
        public var pending = 0

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
        // its chunks from 1 again, so marks of the old one would hide the new one's records.
        let ring = (try? reader.info()).map { UInt64(bitPattern: $0.createdNanoseconds) } ?? 0
        if ring != 0 && cursor.ring != 0 && cursor.ring != ring {
            var fresh = ExportCursor()
            fresh.exported = cursor.exported
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
        // The new entries stay held by the C reader; only those not exported yet are decoded, a
        // batch at a time (memory: the reader's entries and one batch).
        let held: Int
        if readsEverything {
            reader = try LogReader(path: configuration.source)
            issuesReported = 0
            overwrittenReported = 0
            held = try reader.scanHeld()
            // What needs the whole source (missing archive files, records overwritten or lost by
            // the bundle's own counts) becomes issues, reported below: checked on each whole read.
            _ = try? reader.verify()
            // everything the source holds: marks of chunks below the oldest are of nothing
            var oldest = UInt64.max
            for index in 0..<held { oldest = min(oldest, reader.heldPosition(index).chunkSequence) }
            if held > 0 { cursor.forget(below: oldest) }
            readsEverything = false
        } else {
            held = try reader.scanHeld()
        }
        let issues = reader.issues
        report.issues = issues.dropFirst(issuesReported).map(\.description)
        issuesReported = issues.count
        let overwritten = reader.overwrittenRecords
        report.overwritten = overwritten > overwrittenReported ? overwritten - overwrittenReported : 0
        overwrittenReported = max(overwrittenReported, overwritten)
        // The queue, for ``statistics``: positions only (nothing decoded), O(held).
        var queued = 0
        for index in 0..<held {
            let (sequence, offset) = reader.heldPosition(index)
            if !cursor.isExported(chunkSequence: sequence, chunkOffset: offset) { queued += 1 }
        }
        monitor.update { [report] in
            $0.issues += report.issues.count
            $0.overwritten += report.overwritten
            $0.pending = queued
        }
        if case .otlp(let destination, var encoding) = sink, encoding.executableName == nil {
            for session in reader.knownSessions where !session.executable.isEmpty {
                encoding.executableNames[session.pid] = (session.executable as NSString).lastPathComponent
            }
            sink = .otlp(destination, encoding)
        }
        var next = 0
        // Decoded, not acknowledged, in order: the first `assigned` are in flight (`flights`, one
        // batch each, in the same order), the rest wait for a batch.
        var pending: [LogEntry] = []
        var assigned = 0
        var flights: [Flight] = []
        // Records per batch for the rest of this pass, halved by each 413 (the collector's limit).
        var recordLimit = configuration.maximumBatchRecords
        var repeatsCounted = 0  // leading pending records whose repeat was counted
        let depth: Int
        if case .otlp = sink { depth = configuration.requestsInFlight } else { depth = 1 }
        /// Decodes what the next batch needs.
        func fill() {
            while pending.count - assigned < configuration.maximumBatchRecords && next < held {
                let (sequence, offset) = reader.heldPosition(next)
                if !cursor.isExported(chunkSequence: sequence, chunkOffset: offset) { pending.append(reader.heldEntry(next)) }
                next += 1
            }
        }
        /// A pass that is cancelled stops without acknowledging the batches under way (they stay
        /// in flight in the cursor: sent again by the next pass, counted as repeated).
        func stopIfCancelled() throws {
            if Task.isCancelled {
                for flight in flights { flight.task?.cancel() }
                cursor.repeated += UInt64(report.repeated)
                try store.save(cursor, as: configuration.destinationName)
                throw ExportError.cancelled(report)
            }
        }
        /// Starts the batch of the `count` records from `start` (records already assigned to a
        /// batch that went before, when a 413 splits it), recorded in flight before it is sent.
        func launch(from start: Int, count: Int) throws -> Flight {
            var end = count
            var body: [UInt8] = []
            if case .otlp(_, let encoding) = sink {
                body = encoding.encode(Array(pending[start..<start + end]), observedNanoseconds: Spool.wallClock())
                while body.count > configuration.maximumBatchBytes && end > 1 {  // halve until it fits
                    end /= 2
                    body = encoding.encode(Array(pending[start..<start + end]), observedNanoseconds: Spool.wallClock())
                }
            }
            // Counted once per record: a batch split after a 413 sends its records again.
            let fresh = max(0, start + end - max(start, repeatsCounted))
            let repeated = pending[(start + end - fresh)..<(start + end)].filter(resumed.wasInFlight).count
            repeatsCounted = max(repeatsCounted, start + end)
            report.repeated += repeated
            if repeated > 0 { monitor.update { $0.repeated += repeated } }
            cursor.inFlight = ExportCursor.extent(of: pending[0..<max(assigned, start + end)])
            try store.save(cursor, as: configuration.destinationName)
            var task: Task<OTLPDestination.Delivery, Never>?
            if case .otlp(let destination, _) = sink {
                let batchBody = body
                task = Task { await destination.deliver(batchBody) }
            }
            return Flight(count: end, bodyBytes: body.count, task: task)
        }
        while true {
            fill()
            while flights.count < depth && assigned < pending.count {
                let flight = try launch(from: assigned, count: min(pending.count - assigned, recordLimit))
                flights.append(flight)
                assigned += flight.count
                fill()
            }
            if flights.isEmpty { break }
            let head = flights.removeFirst()
            let batch = pending[0..<head.count]
            switch sink {
            case .otlp:
                let tasks = TaskList(([head] + flights).compactMap(\.task))
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
                            let flight = try launch(from: covered, count: min(recordLimit, head.count - covered))
                            again.append(flight)
                            covered += flight.count
                        }
                        flights.insert(contentsOf: again, at: 0)
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
                    cursor.inFlight = [:]
                    try store.save(cursor, as: configuration.destinationName)
                    throw ExportError.unusableDestination(reason)
                }
            }
            cursor.acknowledge(batch)
            pending.removeFirst(head.count)
            assigned -= head.count
            repeatsCounted = max(0, repeatsCounted - head.count)
            cursor.inFlight = ExportCursor.extent(of: pending[0..<assigned])  // the batches still in flight
            try store.save(cursor, as: configuration.destinationName)
            monitor.update { $0.pending = max(0, $0.pending - batch.count) }
        }
        cursor.repeated += UInt64(report.repeated)
        resumed.inFlight = [:]
        try store.save(cursor, as: configuration.destinationName)
        if cursor.marks.count > configuration.maximumMarks { readsEverything = true }
        return report
    }

    /// The cursor as saved (for reports and tests).
    public var savedCursor: ExportCursor { cursor }

    /// A batch in flight: its records (the next `count` of the pending ones), the bytes of its
    /// body, and its delivery (OTLP; nil for syslog, delivered when it is the head).
    private struct Flight {
        let count: Int
        let bodyBytes: Int
        let task: Task<OTLPDestination.Delivery, Never>?
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
