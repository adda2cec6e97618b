import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logbook

/// Delivers spooled items to an HTTP server: at least once, never deleting an item before a 2xx,
/// retrying by the ``RetryPolicy`` with the state kept in the spool, so that a relaunch resumes
/// where a kill left off. Every request carries `Idempotency-Key: "ID"` (a structured-field
/// string) and `Logbook-Attempt: N`, so that the server can drop repeats.
///
/// WORK IN PROGRESS (issue 12): quotas, consent, keeping given-up items, progress and the
/// archive wiring are not built yet.
public final class Uploader: @unchecked Sendable {
    public struct Configuration: Sendable {
        /// The spool directory (created 0700; one process at a time).
        public var spool: String
        public var policy: RetryPolicy
        /// Uploads at once.
        public var maxConcurrentUploads: Int
        /// One attempt's limit (connection, body and answer).
        public var timeout: Duration
        /// The request for an item: URL, method, headers, auth. The body is the item's content.
        public var makeRequest: @Sendable (SpooledItem) -> URLRequest
        /// The wall clock (ns since the epoch); tests inject one.
        public var clock: @Sendable () -> Int64

        public init(spool: String, policy: RetryPolicy = .fileUpload, maxConcurrentUploads: Int = 2,
                    timeout: Duration = .seconds(60), clock: @escaping @Sendable () -> Int64 = Spool.wallClock,
                    makeRequest: @escaping @Sendable (SpooledItem) -> URLRequest) {
            self.spool = spool
            self.policy = policy
            self.maxConcurrentUploads = maxConcurrentUploads
            self.timeout = timeout
            self.clock = clock
            self.makeRequest = makeRequest
        }
    }

    /// What became of an item.
    public enum Outcome: Sendable, Equatable {
        case delivered(id: String, attempts: Int)
        case gaveUp(id: String, reason: String)
        case expired(id: String)
        /// Its state file was damaged: moved to the spool's `quarantine/`, not uploaded.
        case quarantined(id: String)
    }

    public let configuration: Configuration
    /// Every outcome, in the order they happen.
    public let outcomes: AsyncStream<Outcome>
    private let outcomeSink: AsyncStream<Outcome>.Continuation
    private let spool: Locked<Spool>
    /// Pending items and those being uploaded, by id.
    private let queue: Locked<(items: [String: SpooledItem], inFlight: Set<String>)>
    private let session: URLSession
    private let workers: Locked<[Task<Void, Never>]>
    private let randomness = Locked(SystemRandomNumberGenerator())

    /// Opens the spool and resumes every item it holds.
    public init(_ configuration: Configuration) throws {
        self.configuration = configuration
        let opened = try Spool(path: configuration.spool, clock: configuration.clock)
        let contents = try opened.contents()
        spool = Locked(opened)
        queue = Locked((Dictionary(uniqueKeysWithValues: contents.items.map { ($0.id, $0) }), []))
        (outcomes, outcomeSink) = AsyncStream.makeStream(of: Outcome.self)
        for id in contents.quarantined { outcomeSink.yield(.quarantined(id: id)) }
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = Double(nanoseconds(configuration.timeout)) / 1e9
        session = URLSession(configuration: sessionConfiguration)
        workers = Locked([])
    }

    deinit { outcomeSink.finish() }

    /// Puts a file into the spool (a hard link, or a copy), durably, before returning: safe to call
    /// from an archive roll callback, whose file retention may delete afterwards.
    @discardableResult
    public func submit(file: String, id: String? = nil) throws -> SpooledItem {
        let item = try spool.withLock { try $0.submit(file: file, id: id) }
        queue.withLock { state in if state.items[item.id] == nil { state.items[item.id] = item } }
        return item
    }

    @discardableResult
    public func submit(data: [UInt8], id: String? = nil) throws -> SpooledItem {
        let item = try spool.withLock { try $0.submit(data: data, id: id) }
        queue.withLock { state in if state.items[item.id] == nil { state.items[item.id] = item } }
        return item
    }

    /// Items not delivered yet.
    public var pending: [SpooledItem] {
        queue.withLock { Array($0.items.values) }.sorted { $0.firstSubmittedNanoseconds < $1.firstSubmittedNanoseconds }
    }

    /// Starts the uploads (`maxConcurrentUploads` workers).
    public func start() {
        workers.withLock { workers in
            guard workers.isEmpty else { return }
            for _ in 0..<max(1, configuration.maxConcurrentUploads) {
                workers.append(Task.detached { [self] in await work() })
            }
        }
    }

    /// Stops the uploads; an upload in flight is abandoned and tried again by the next start or
    /// launch (its state was not changed).
    public func stop() async {
        let running = workers.withLock { workers in
            defer { workers = [] }
            return workers
        }
        for task in running { task.cancel() }
        for task in running { await task.value }
    }

    private func work() async {
        while !Task.isCancelled {
            guard let item = takeDueItem() else {
                try? await Task.sleep(for: .milliseconds(100))
                continue
            }
            if configuration.policy.isExpired(firstSubmittedNanoseconds: item.firstSubmittedNanoseconds,
                                              nowNanoseconds: configuration.clock()) {
                finish(item, .expired(id: item.id))  // e.g. found by a launch after a long downtime
                continue
            }
            let outcome = await attempt(item)
            if Task.isCancelled {
                _ = queue.withLock { $0.inFlight.remove(item.id) }
                return
            }
            settle(item, outcome)
        }
    }

    /// The oldest item whose time has come, marked in flight.
    private func takeDueItem() -> SpooledItem? {
        let now = configuration.clock()
        return queue.withLock { state in
            let due = state.items.values
                .filter { !state.inFlight.contains($0.id) && $0.nextAttemptNanoseconds <= now }
                .min { ($0.nextAttemptNanoseconds, $0.id) < ($1.nextAttemptNanoseconds, $1.id) }
            if let due { state.inFlight.insert(due.id) }
            return due
        }
    }

    private func attempt(_ item: SpooledItem) async -> AttemptOutcome {
        var request = configuration.makeRequest(item)
        request.setValue("\"\(item.id)\"", forHTTPHeaderField: "Idempotency-Key")
        request.setValue(String(item.attempts + 1), forHTTPHeaderField: "Logbook-Attempt")
        request.timeoutInterval = Double(nanoseconds(configuration.timeout)) / 1e9
        let path = spool.withLock { $0.dataPath(item.id) }
        do {
            // A mapped Data body, never upload(fromFile:): FoundationNetworking traps on a reset
            // mid-body with a file body (see docs/UPLOAD-PLAN.md).
            let body = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
            let (_, response) = try await session.upload(for: request, from: body)
            guard let http = response as? HTTPURLResponse else { return .transportError("not an HTTP response") }
            return .status(http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        } catch let error as URLError where error.code == .timedOut {
            return .timedOut
        } catch {
            return .transportError(String(describing: error))
        }
    }

    private func settle(_ item: SpooledItem, _ outcome: AttemptOutcome) {
        var item = item
        item.attempts += 1
        let now = configuration.clock()
        let decision = randomness.withLock { random in
            configuration.policy.decide(outcome, attempt: item.attempts,
                                        firstSubmittedNanoseconds: item.firstSubmittedNanoseconds,
                                        nowNanoseconds: now, using: &random)
        }
        switch outcome {
        case .status(let status, _):
            item.lastStatus = status
            item.lastReason = "HTTP \(status)"
        case .transportError(let text):
            item.lastStatus = -1
            item.lastReason = text
        case .timedOut:
            item.lastStatus = -1
            item.lastReason = "timed out"
        }
        let final: Outcome?
        switch decision {
        case .delivered: final = .delivered(id: item.id, attempts: item.attempts)
        case .gaveUp(let reason): final = .gaveUp(id: item.id, reason: reason)
        case .expired: final = .expired(id: item.id)
        case .retry(let at):
            item.nextAttemptNanoseconds = at
            final = nil
        }
        if let final {
            finish(item, final)
        } else {
            try? spool.withLock { try $0.update(item) }
            queue.withLock { state in
                state.items[item.id] = item
                state.inFlight.remove(item.id)
            }
        }
    }

    /// The item leaves the spool: only after the server's answer (or its expiry).
    private func finish(_ item: SpooledItem, _ outcome: Outcome) {
        try? spool.withLock { try $0.remove(item.id) }
        queue.withLock { state in
            state.items[item.id] = nil
            state.inFlight.remove(item.id)
        }
        outcomeSink.yield(outcome)
    }
}
