import Foundation
import Logbook

/// What the exporter's pass reads: the records of a source that a cursor does not cover, decoded
/// on a thread of their own from the reader's stream (``LogReader/stream(where:_:)``, memory
/// bounded by its window) and handed over in batches bounded in records and in bytes. At most
/// `capacity` batches wait: the thread blocks until the pass takes one, so memory is the window,
/// the waiting batches and those the pass holds, whatever the backlog and the records' sizes.
///
/// The thread has the reader to itself until it ends; the pass reads the reader's issues and
/// counts only after ``next()`` returned nil. A pass that stops early calls ``stop()``: the thread
/// ends (the reader reads what is left without decoding it and counts it as read, so that reader
/// must not be used for another pass).
final class EntryStream: @unchecked Sendable {
    /// Decoded records, in the reader's order, with the executable names of the sessions known
    /// when the batch was made (nil when they are the same as for the batch before).
    struct Batch {
        var entries: [LogEntry]
        var executables: [UInt32: String]?
    }

    /// What the whole read saw: the lowest chunk sequence of every record (skipped ones too), or
    /// `UInt64.max` when there was none.
    private(set) var oldestChunk = UInt64.max

    private let condition = NSCondition()
    private var waiting: [Batch] = []
    private var capacity: Int
    private var ended: Result<Void, Error>?
    private var stopped = false
    private var consumer: CheckedContinuation<Batch?, Error>?
    /// Told the records of each batch as it is queued (never after ``stop()``).
    private let onQueued: @Sendable (Int) -> Void

    private struct Stopped: Error {}

    /// What a decoded record takes in memory, about: a ``LogEntry`` with its arrays, and its
    /// strings and values at about twice their encoded bytes. String-heavy records take many
    /// times what a record of numbers does: batches are bounded by this as well as by records.
    static func estimatedBytes(argumentBytes: Int) -> Int { 256 + 2 * argumentBytes }

    /// Starts the thread: records of `reader` not exported by `cursor` (a copy: acknowledgements
    /// during the pass are of records this read already handed over), in batches of `batchRecords`
    /// records or about `batchBytes` bytes decoded (``estimatedBytes(argumentBytes:)``), whichever
    /// comes first.
    init(reader: LogReader, skipping cursor: ExportCursor, batchRecords: Int, batchBytes: Int, capacity: Int,
         onQueued: @escaping @Sendable (Int) -> Void) {
        self.capacity = max(1, capacity)
        self.onQueued = onQueued
        nonisolated(unsafe) let reader = reader
        let thread = Thread { [self] in
            var batch: [LogEntry] = []
            var bytes = 0
            batch.reserveCapacity(min(batchRecords, 4096))
            var sessions = 0
            var oldest = UInt64.max
            func executables() -> [UInt32: String]? {
                guard reader.knownSessionCount != sessions else { return nil }
                sessions = reader.knownSessionCount
                var names: [UInt32: String] = [:]
                for session in reader.knownSessions where !session.executable.isEmpty {
                    names[session.pid] = (session.executable as NSString).lastPathComponent
                }
                return names
            }
            let result = Result<Void, Error> {
                try reader.stream { record in
                    let sequence = record.chunkSequence
                    if sequence < oldest { oldest = sequence }
                    guard !cursor.isExported(chunkSequence: sequence, chunkOffset: record.chunkOffset) else { return }
                    batch.append(record.entry)
                    bytes += Self.estimatedBytes(argumentBytes: record.argumentBytes)
                    if batch.count >= batchRecords || bytes >= batchBytes {
                        try self.push(Batch(entries: batch, executables: executables()))
                        batch.removeAll(keepingCapacity: true)
                        bytes = 0
                    }
                }
                if !batch.isEmpty { try self.push(Batch(entries: batch, executables: executables())) }
            }
            self.finish(result, oldest: oldest)
        }
        thread.name = "logbook-export-read"
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Waits for room, then queues `batch`; throws when the pass stopped.
    private func push(_ batch: Batch) throws {
        condition.lock()
        while waiting.count >= capacity && !stopped { condition.wait() }
        if stopped {
            condition.unlock()
            throw Stopped()
        }
        onQueued(batch.entries.count)
        if let consumer {
            self.consumer = nil
            condition.unlock()
            consumer.resume(returning: batch)
            return
        }
        waiting.append(batch)
        condition.unlock()
    }

    private func finish(_ result: Result<Void, Error>, oldest: UInt64) {
        condition.lock()
        oldestChunk = oldest
        ended = result
        let consumer = self.consumer
        self.consumer = nil
        condition.unlock()
        switch result {
        case .success: consumer?.resume(returning: nil)
        case .failure(let error): consumer?.resume(throwing: error)
        }
    }

    /// The next batch, nil when the read ended; rethrows what stopped the read (a reader's error).
    func next() async throws -> Batch? {
        try await withCheckedThrowingContinuation { continuation in
            condition.lock()
            if !waiting.isEmpty {
                let batch = waiting.removeFirst()
                condition.signal()
                condition.unlock()
                continuation.resume(returning: batch)
                return
            }
            switch ended {
            case nil:
                consumer = continuation
                condition.unlock()
            case .success?:
                condition.unlock()
                continuation.resume(returning: nil)
            case .failure(let error)?:
                condition.unlock()
                continuation.resume(throwing: error is Stopped ? CancellationError() : error)
            }
        }
    }

    /// The pass takes no more: the thread stops decoding and ends.
    func stop() {
        condition.lock()
        stopped = true
        waiting.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}

/// The records a pass holds, in order: the stream's batches kept as they came (appending one
/// copies no record), read as slices; records leave from the front as batches are settled.
struct EntryQueue {
    private var segments: [[LogEntry]] = []
    /// Records of the first segment already removed.
    private var skipped = 0
    private(set) var count = 0

    mutating func append(_ entries: [LogEntry]) {
        guard !entries.isEmpty else { return }
        segments.append(entries)
        count += entries.count
    }

    /// Records `start ..< start + length` (from the front): a slice of one segment when they lie
    /// in one (the usual batch), else a copy.
    func slice(_ start: Int, _ length: Int) -> ArraySlice<LogEntry> {
        var position = start + skipped
        for segment in segments {
            if position < segment.count {
                if position + length <= segment.count { return segment[position..<position + length] }
                break
            }
            position -= segment.count
        }
        var copy: [LogEntry] = []
        copy.reserveCapacity(length)
        var remaining = length
        position = start + skipped
        for segment in segments where remaining > 0 {
            if position >= segment.count {
                position -= segment.count
                continue
            }
            let take = min(remaining, segment.count - position)
            copy += segment[position..<position + take]
            remaining -= take
            position = 0
        }
        return copy[...]
    }

    mutating func removeFirst(_ length: Int) {
        precondition(length <= count)
        count -= length
        skipped += length
        while let first = segments.first, skipped >= first.count {
            skipped -= first.count
            segments.removeFirst()
        }
    }
}
