import CLogbook
import CLogbookUpload
import Foundation
import Logbook

/// Delivers spooled items to an HTTP server: at least once, never deleting an item before a 2xx,
/// retrying by the ``RetryPolicy`` with the state kept in the spool, so that a relaunch resumes
/// where a kill left off. Every request carries `Idempotency-Key: "ID"` (a structured-field
/// string) and `Logbook-Attempt: N`, so that the server can drop repeats. Bodies stream from the
/// spool in bounded memory; a server that offers resumable uploads (its 104 answer) gets only the
/// bytes it does not have yet after a kill or a lost connection.
///
/// ```swift
/// let uploader = try Uploader(.init(spool: "/var/lib/app/upload-spool") { item in
///     DeliveryRequest(method: "PUT", url: "https://logs.example.com/v1/files/\(item.id)")
/// })
/// uploader.start()
/// try uploader.submit(file: "/var/log/app/crash-report.json")
/// ```
///
/// Thread-safe: submit from any thread, including an archive roll callback.
public final class Uploader: Sendable {
    public struct Configuration: Sendable {
        /// The spool directory (created 0700; one process at a time). On the file system of the
        /// files submitted, a submission is a hard link; elsewhere, a copy.
        public var spool: String
        public var policy: RetryPolicy
        /// Uploads at once (at least 1).
        public var maxConcurrentUploads: Int
        /// How long an attempt's body may go without a byte sent (connecting included), and how
        /// long after its end the whole answer may take, before the attempt counts as timed out
        /// (an answer trickled a byte at a time cannot hold it longer; only its body's first 64 KiB
        /// are read).
        public var timeout: Duration
        /// How much the spool may hold; the oldest pending items go first when it would hold more.
        public var quota: Quota
        /// Whether an item given up is kept in the spool's `given-up/` directory (for a person to
        /// look at) rather than deleted. Either way it is counted and reported.
        public var keepsGivenUpItems: Bool
        /// Whether uploads may start (the user's consent); ``Uploader/isAllowed`` changes it later.
        /// Items are spooled either way.
        public var isAllowed: Bool
        /// The request for an item: URL, method, headers, auth. The body is the item's content.
        public var makeRequest: @Sendable (SpooledItem) -> DeliveryRequest
        /// Whether uploads offer to be resumable (draft-ietf-httpbis-resumable-upload, interop
        /// version 6): a server that answers with 104 and an upload URL gets, after a lost
        /// connection or a kill, only the bytes it does not have. A server that does not is sent
        /// a plain request, as with `false`.
        public var resumesUploads: Bool
        /// The wall clock (ns since the epoch); tests inject one.
        public var clock: @Sendable () -> Int64
        /// Where the items go, in words (the CLI passes its `--to` URL): delivery marks are per
        /// destination, so a file delivered to one is still submitted for another. "" is the
        /// destination of marks made before marks had one.
        public var destination: String

        public init(spool: String, policy: RetryPolicy = .fileUpload, maxConcurrentUploads: Int = 2,
                    timeout: Duration = .seconds(60), quota: Quota = Quota(), keepsGivenUpItems: Bool = false,
                    isAllowed: Bool = true, destination: String = "", resumesUploads: Bool = true,
                    clock: @escaping @Sendable () -> Int64 = Spool.wallClock,
                    makeRequest: @escaping @Sendable (SpooledItem) -> DeliveryRequest) {
            self.resumesUploads = resumesUploads
            self.destination = destination
            self.spool = spool
            self.policy = policy
            self.maxConcurrentUploads = maxConcurrentUploads
            self.timeout = timeout
            self.quota = quota
            self.keepsGivenUpItems = keepsGivenUpItems
            self.isAllowed = isAllowed
            self.clock = clock
            self.makeRequest = makeRequest
        }
    }

    /// The spool's limits. Defaults: 1 GiB, 10,000 items, no age limit (the policy's expiry, 2
    /// days, still ends every item).
    public struct Quota: Sendable, Equatable {
        /// Bytes of all pending items' content. An item larger than this alone is refused.
        public var maxBytes: Int?
        public var maxItems: Int?
        /// Pending items older than this (since their first submission) are dropped.
        public var maxAge: Duration?

        public init(maxBytes: Int? = 1 << 30, maxItems: Int? = 10_000, maxAge: Duration? = nil) {
            self.maxBytes = maxBytes
            self.maxItems = maxItems
            self.maxAge = maxAge
        }
    }

    /// What became of an item.
    public enum Outcome: Sendable, Hashable {
        /// The server answered 2xx; the item is gone from the spool.
        case delivered(id: String, attempts: Int)
        /// Not retryable (a status such as 400, or the attempts ran out), or its content in the
        /// spool cannot be sent (not what its key names, or gone: its files are then kept in
        /// `quarantine/`); the reason says which.
        case gaveUp(id: String, reason: String)
        /// Its expiry passed before it could be delivered.
        case expired(id: String)
        /// Removed unsent: by the quota (the oldest first) or by ``Uploader/purge()``.
        case dropped(id: String, reason: String)
        /// Its state file was damaged, or its content is not a regular file: moved to the spool's
        /// `quarantine/`, not uploaded (left where it is when `quarantine/` is not a private
        /// directory: a symlink there is never followed).
        case quarantined(id: String)
        /// A rolled archive file could not be put into the spool (``Uploader/submit(archive:)``);
        /// it stays in the archive directory for ``Uploader/submitArchives(in:includingDelivered:)``.
        case notSubmitted(path: String, reason: String)
    }

    /// Counters since this uploader was opened, and the spool now.
    public struct Statistics: Sendable, Equatable {
        public var pendingItems = 0
        public var pendingBytes = 0
        public var uploading = 0
        public var delivered = 0
        public var deliveredBytes = 0
        public var gaveUp = 0
        public var expired = 0
        public var dropped = 0
        public var quarantined = 0
        public var notSubmitted = 0
        public var attempts = 0
        public var failedAttempts = 0
        /// Body bytes sent by all attempts, those in flight included (a resumed attempt counts only
        /// what it sends).
        public var bytesSent = 0
        /// Upload URLs not used: a 104's `Location` that is no URI reference or is on another
        /// origin than its request's, a 104 too large to read (over 100 KiB: that attempt failed),
        /// and one kept in the spool for another request URL (an earlier run's destination, or a
        /// copied or edited state). Each upload went on, or started over, as a plain one.
        public var ignoredUploadURLs = 0
        /// Why the last of ``ignoredUploadURLs`` was ignored, in words.
        public var lastIgnoredUploadURL: String?
        /// The items being uploaded now, with how far each has come.
        public var inFlight: [Transfer] = []
    }

    /// An item being uploaded: its bytes the server has (a resumed upload's offset, then what this
    /// attempt sent), and this attempt's rate.
    public struct Transfer: Sendable, Equatable {
        public var id: String
        public var byteCount: Int
        public var bytesDone: Int
        public var bytesPerSecond: Double
    }

    public let configuration: Configuration
    /// Every outcome, in the order they happen (the newest 4096 are kept for a slow reader;
    /// ``statistics`` counts them all).
    public let outcomes: AsyncStream<Outcome>
    private let outcomeSink: AsyncStream<Outcome>.Continuation
    private let state: Locked<State>
    private let wakeup = Wakeup()
    private let transport = HTTPTransport()
    private let workers = Locked<[Task<Void, Never>]>([])

    /// Everything that changes, under one lock: the spool's files change only with the queue.
    private struct State {
        let spool: Spool
        /// Pending items (those being uploaded included), by id.
        var items: [String: SpooledItem]
        var inFlight: Set<String> = []
        /// In flight when `purge()` ran: dropped when their attempt ends, unless it delivered them.
        var purging: Set<String> = []
        var stopped = false
        var allowed: Bool
        var counters = Statistics()
        /// The attempts in flight, for their progress.
        var flights: [String: Flight] = [:]
        /// Items whose server answered an offer of a resumable upload with a 104 too large to read
        /// (over 100 KiB): their next attempts in this run offer none, as plain uploads.
        var plainUploads: Set<String> = []
    }

    private struct Flight {
        let byteCount: Int
        let progress: TransferProgress
        let started: ContinuousClock.Instant
        var offset: UInt64 = 0
    }

    /// Opens the spool (throws when another process uses it) and resumes every item it holds.
    public init(_ configuration: Configuration) throws(LogbookError) {
        self.configuration = configuration
        let spool = try Spool(path: configuration.spool, clock: configuration.clock)
        let contents = try spool.contents()
        state = Locked(State(spool: spool, items: Dictionary(uniqueKeysWithValues: contents.items.map { ($0.id, $0) }),
                             allowed: configuration.isAllowed))
        (outcomes, outcomeSink) = AsyncStream.makeStream(of: Outcome.self, bufferingPolicy: .bufferingNewest(4096))
        for id in contents.quarantined { report(.quarantined(id: id)) }
        for item in contents.withoutContent { report(.gaveUp(id: item.id, reason: Self.contentMissing(item))) }
        state.withLock { state in
            state.counters.quarantined = contents.quarantined.count + contents.withoutContent.count
            state.counters.gaveUp = contents.withoutContent.count
            enforceQuota(&state, keeping: nil)
        }
    }

    deinit {
        for task in workers.withLock({ $0 }) { task.cancel() }
        outcomeSink.finish()
    }

    // MARK: submitting

    /// Puts a file into the spool, durably, before returning: a fsynced copy, so that once this
    /// returns, changing or deleting the file loses nothing. With `linking`, a hard link where the
    /// spool is on the file's file system (a copy otherwise): only for files that are never
    /// changed in place, such as complete archive files (``submit(archive:)`` links); a linked
    /// file whose size changes before its upload is given up, never sent. The id defaults to the
    /// SHA-256 of the content (`lba-RING-NUMBER` for a complete Logbook archive file, which is
    /// linked); the same id again returns the item already spooled, and an id already spooled
    /// with other content throws `EEXIST`. A caller's id must not look like those (64 hex digits,
    /// `lba-…`).
    @discardableResult
    public func submit(file: String, id: String? = nil, linking: Bool = false) throws(LogbookError) -> SpooledItem {
        try requireCallersIdentifier(id)
        return try spool(file: file, id: id, linking: linking)
    }

    private func spool(file: String, id: String?, linking: Bool) throws(LogbookError) -> SpooledItem {
        try requireWithinQuota(try Spool.byteCount(ofFile: file), file)
        let (id, linking) = id == nil ? Self.archiveIdentity(file) ?? (nil, linking) : (id, linking)
        return try spooling { spool throws(LogbookError) in try spool.submit(file: file, id: id, linking: linking) }
    }

    /// A complete Logbook archive file (by its name and header) is the same item however it is
    /// submitted: its id is `lba-RING-NUMBER`, and it is linked (it is never changed).
    private static func archiveIdentity(_ file: String) -> (String?, Bool)? {
        let name = file.split(separator: "/").last.map(String.init) ?? file
        guard isCompleteArchiveName(name), let id = try? archiveIdentifier(ofFile: file) else { return nil }
        return (id, true)
    }

    /// A caller's id must not have the shape of the ids Logbook makes (64 hex digits: a content
    /// hash; `lba-`: an archive file), so that it can never take one of theirs.
    private func requireCallersIdentifier(_ id: String?) throws(LogbookError) {
        guard let id else { return }
        let looksLikeAHash = id.utf8.count == 64 && id.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
        if looksLikeAHash || id.hasPrefix("lba-") {
            throw LogbookError(subject: .uploader, operation: "Uploader.submit", path: configuration.spool, errno: EINVAL,
                               detail: "item identifier '\(id)' has the shape of Logbook's own (64 hex digits, or lba-…): choose another")
        }
    }

    /// Like ``submit(file:id:linking:)``, unless this file was delivered before under the same id (its
    /// delivery mark, see ``submitArchives(in:includingDelivered:)``): then nothing is submitted and the result is `nil`.
    /// Running the same upload twice then sends nothing twice.
    public func submitUnlessDelivered(file: String, id: String? = nil, linking: Bool = false) throws(LogbookError) -> SpooledItem? {
        try requireCallersIdentifier(id)
        try requireWithinQuota(try Spool.byteCount(ofFile: file), file)  // before hashing a file too large
        let id = if let id { id } else if let (archive, _) = Self.archiveIdentity(file), let archive { archive }
                 else { try Spool.contentIdentifier(ofFile: file) }
        let delivered = state.withLock { $0.items[id] == nil && $0.spool.wasDelivered(file: file, id: id, to: configuration.destination) }
        return delivered ? nil : try spool(file: file, id: id, linking: linking)
    }

    /// Puts `data` into the spool as an item (written and fsynced before returning).
    @discardableResult
    public func submit(data: [UInt8], id: String? = nil) throws(LogbookError) -> SpooledItem {
        try requireCallersIdentifier(id)
        try requireWithinQuota(data.count, nil)
        return try spooling { spool throws(LogbookError) in try spool.submit(data: data, id: id) }
    }

    private func requireWithinQuota(_ byteCount: Int, _ file: String?) throws(LogbookError) {
        if let maxBytes = configuration.quota.maxBytes, byteCount > maxBytes {
            throw LogbookError(subject: .uploader, operation: "Uploader.submit", path: file ?? configuration.spool, errno: EFBIG,
                               detail: "\(byteCount) bytes is more than the spool's quota of \(maxBytes) bytes")
        }
    }

    private func spooling(_ body: (Spool) throws(LogbookError) -> SpooledItem) throws(LogbookError) -> SpooledItem {
        let result: Result<SpooledItem, LogbookError> = state.withLock { state in
            do throws(LogbookError) {
                let item = try body(state.spool)
                if state.items[item.id] == nil { state.items[item.id] = item }
                enforceQuota(&state, keeping: item.id)
                return .success(item)
            } catch {
                return .failure(error)
            }
        }
        wakeup.signal()
        return try result.get()
    }

    /// Drops the oldest pending items (never `keeping`) until the spool is within its quota.
    private func enforceQuota(_ state: inout State, keeping: String?) {
        let quota = configuration.quota
        let now = configuration.clock()
        var bytes = state.items.values.reduce(0) { $0 + $1.byteCount }
        var count = state.items.count
        for item in state.items.values.sorted(by: { ($0.firstSubmittedNanoseconds, $0.id) < ($1.firstSubmittedNanoseconds, $1.id) })
        where item.id != keeping {
            let reason: String
            if let maxAge = quota.maxAge, now - item.firstSubmittedNanoseconds > nanoseconds(maxAge) {
                reason = "older than the spool's age limit of \(maxAge)"
            } else if let maxBytes = quota.maxBytes, bytes > maxBytes {
                reason = "the spool's quota of \(maxBytes) bytes was reached"
            } else if let maxItems = quota.maxItems, count > maxItems {
                reason = "the spool's quota of \(maxItems) items was reached"
            } else if quota.maxAge == nil {
                break  // oldest first: nothing younger is over a limit either
            } else {
                continue
            }
            bytes -= item.byteCount
            count -= 1
            remove(item, from: &state, outcome: .dropped(id: item.id, reason: reason))
        }
    }

    // MARK: consent and control

    /// Whether uploads may run (the user's consent). While `false`, items are spooled but nothing is
    /// sent; an upload in flight when it turns `false` completes.
    public var isAllowed: Bool {
        get { state.withLock { $0.allowed } }
        set {
            state.withLock { $0.allowed = newValue }
            wakeup.signal()
        }
    }

    /// Removes every pending item unsent (e.g. when the user withdraws consent); each is reported
    /// as dropped. An item being uploaded at that moment is dropped when its attempt ends, unless
    /// the server took it (then it is reported delivered). Returns how many items were pending.
    @discardableResult
    public func purge() -> Int {
        state.withLock { state in
            let items = Array(state.items.values)
            for item in items {
                if state.inFlight.contains(item.id) {
                    state.purging.insert(item.id)
                } else {
                    remove(item, from: &state, outcome: .dropped(id: item.id, reason: "purged"))
                }
            }
            return items.count
        }
    }

    /// Items not delivered yet, oldest first.
    public var pending: [SpooledItem] {
        state.withLock { Array($0.items.values) }
            .sorted { ($0.firstSubmittedNanoseconds, $0.id) < ($1.firstSubmittedNanoseconds, $1.id) }
    }

    /// What the uploader has done, and what its spool holds now.
    public var statistics: Statistics {
        state.withLock { state in
            var statistics = state.counters
            statistics.pendingItems = state.items.count
            statistics.pendingBytes = state.items.values.reduce(0) { $0 + $1.byteCount }
            statistics.uploading = state.inFlight.count
            let now = ContinuousClock.now
            for (id, flight) in state.flights {
                let sent = Int(flight.progress.bytesSent)
                statistics.bytesSent += sent
                let elapsed = Double(nanoseconds(now - flight.started)) / 1e9
                statistics.inFlight.append(Transfer(id: id, byteCount: flight.byteCount, bytesDone: Int(flight.offset) + sent,
                                                    bytesPerSecond: elapsed > 0 ? Double(sent) / elapsed : 0))
            }
            statistics.inFlight.sort { $0.id < $1.id }
            return statistics
        }
    }

    /// Starts the uploads (`maxConcurrentUploads` workers). Does nothing after ``stop()``.
    public func start() {
        guard !state.withLock({ $0.stopped }) else { return }
        workers.withLock { workers in
            guard workers.isEmpty else { return }
            for _ in 0..<max(1, configuration.maxConcurrentUploads) {
                // Held only during an attempt, never while idle: an uploader nobody references
                // goes (its deinit cancels the workers and releases the spool's lock) once its
                // uploads in flight end.
                workers.append(Task.detached { [weak self, wakeup] in
                    while !Task.isCancelled {
                        guard let next = await self?.step() else { return }
                        if case .wait(let generation, let duration) = next {
                            await wakeup.wait(ifStill: generation, upTo: duration)
                        }
                    }
                })
            }
        }
    }

    /// Stops the uploads for good, and finishes ``outcomes`` (so that a task reading it ends, and
    /// with it any reference it holds to this uploader). An upload in flight is abandoned and tried
    /// again by the next uploader on this spool (its state was not changed, so it keeps its
    /// attempt count). Submissions still go into the spool. The spool is released when the
    /// uploader goes.
    public func stop() async {
        state.withLock { $0.stopped = true }
        let running = workers.withLock { workers in
            defer { workers = [] }
            return workers
        }
        for task in running { task.cancel() }
        wakeup.signal()
        for task in running { await task.value }
        outcomeSink.finish()
    }

    // MARK: uploading

    /// One worker's turn: an attempt, or how long to wait for work (until the next item is due,
    /// or a submission, a change of consent or a stop; at most a second, so that a clock set
    /// forward is noticed).
    private func step() async -> Turn {
        let generation = wakeup.generation
        switch takeDueItem() {
        case .item(let item):
            let content: OpenedContent
            switch openContent(item) {
            case .success(let opened): content = opened
            case .failure(let problem):
                setAside(item, problem)
                return .worked
            }
            defer { close(content.fd) }
            let result = await attempt(item, content)
            if Task.isCancelled {
                state.withLock { state in  // stopped: its state stays as it was
                    state.inFlight.remove(item.id)
                    if state.purging.remove(item.id) != nil, state.items[item.id] != nil {
                        remove(item, from: &state, outcome: .dropped(id: item.id, reason: "purged"))
                    }
                }
                return .worked
            }
            switch result {
            case .answered(let outcome): settle(item, outcome)
            case .contentProblem(let problem, let attempted) where content.isItsSourceFile:
                setAside(item, BodyProblem(quarantines: false, reason: "the file changed after it was submitted: \(problem.reason)"),
                         attempted: attempted)
            case .contentProblem(let problem, let attempted): setAside(item, problem, attempted: attempted)
            }
            return .worked
        case .wait(let nanoseconds):
            return .wait(generation: generation, .nanoseconds(min(max(nanoseconds, 1_000_000), 1_000_000_000)))
        }
    }

    private enum Turn {
        case worked
        case wait(generation: UInt64, Duration)
    }

    private enum Next {
        case item(SpooledItem)
        case wait(Int64)
    }

    /// The oldest item whose time has come, marked in flight (items past their expiry or the
    /// quota's age are settled on the way); or how long until the next one is due.
    private func takeDueItem() -> Next {
        let now = configuration.clock()
        return state.withLock { state in
            bringTimesBack(&state, now: now)
            if configuration.quota.maxAge != nil { enforceQuota(&state, keeping: nil) }
            guard state.allowed else { return .wait(Int64.max) }
            var due: SpooledItem?
            var soonest = Int64.max
            for item in state.items.values where !state.inFlight.contains(item.id) {
                if configuration.policy.isExpired(firstSubmittedNanoseconds: item.firstSubmittedNanoseconds, nowNanoseconds: now) {
                    remove(item, from: &state, outcome: .expired(id: item.id))  // e.g. found after a long downtime
                    continue
                }
                if item.nextAttemptNanoseconds <= now {
                    if due == nil || (item.nextAttemptNanoseconds, item.id) < (due!.nextAttemptNanoseconds, due!.id) { due = item }
                } else {
                    soonest = min(soonest, item.nextAttemptNanoseconds - now)
                }
            }
            guard let due else { return .wait(soonest) }
            state.inFlight.insert(due.id)
            return .item(due)
        }
    }

    /// Times stored farther ahead than the clock and the policy allow (the wall clock was set back
    /// since they were written, or a state was edited) are brought back, so that no item waits
    /// longer than the policy's bound: a first submission in the future to now, the next attempt
    /// moving with it; then a next attempt farther ahead than the longest wait the policy can ask
    /// after the item's attempts (``RetryPolicy/longestWait(afterAttempt:lastStatus:)``) to that.
    private func bringTimesBack(_ state: inout State, now: Int64) {
        for var item in state.items.values where !state.inFlight.contains(item.id) {
            let original = item
            if item.firstSubmittedNanoseconds > now {
                let (shift, _) = item.firstSubmittedNanoseconds.subtractingReportingOverflow(now)
                item.firstSubmittedNanoseconds = now
                item.nextAttemptNanoseconds = max(now, item.nextAttemptNanoseconds &- shift)
            }
            let counted = item.attempts == 0 ? 0 : max(1, item.attempts - item.progressedAttempts)
            let longest = configuration.policy.longestWait(afterAttempt: counted, lastStatus: item.lastStatus)
            let (latest, overflow) = now.addingReportingOverflow(longest)
            if !overflow && item.nextAttemptNanoseconds > latest { item.nextAttemptNanoseconds = latest }
            guard item != original else { continue }
            state.items[item.id] = item
            try? state.spool.update(item)  // if it cannot be written, the next launch brings it back again
        }
    }

    private enum AttemptResult {
        case answered(AttemptOutcome)
        /// `attempted`: a request of the attempt went out first (its body's bytes, or the HEAD
        /// of a resumed upload), so that it counts as an attempt.
        case contentProblem(BodyProblem, attempted: Bool)
    }

    /// One attempt: the rest of a resumable upload the server keeps (its offset asked first), or
    /// the whole content, streamed from the spool and checked against its key as it goes.
    private func attempt(_ item: SpooledItem, _ content: OpenedContent) async -> AttemptResult {
        var request = configuration.makeRequest(item)
        request.setHeader("Idempotency-Key", "\"\(item.id)\"")
        request.setHeader("Logbook-Attempt", String(item.attempts + 1))
        // The body's framing is the transport's: a Content-Length of the caller's would cut the
        // body short (and the rest would be read as another request on the connection).
        request.setHeader("Content-Length", nil)
        request.setHeader("Transfer-Encoding", nil)
        let progress = TransferProgress()
        let started = ContinuousClock.now
        state.withLock { $0.flights[item.id] = Flight(byteCount: item.byteCount, progress: progress, started: started) }
        defer {
            state.withLock { state in
                if let flight = state.flights.removeValue(forKey: item.id) {
                    state.counters.bytesSent += Int(flight.progress.bytesSent)
                }
            }
        }
        let offersResumable = configuration.resumesUploads && !state.withLock { $0.plainUploads.contains(item.id) }
        if offersResumable, let url = item.resumptionURL {
            if ResumableUpload.mayResume(at: url, learnedFrom: item.resumptionRequestURL, by: request.url) {
                if let result = await resume(item, at: url, request, content, progress) { return result }
            } else {
                // Learned for another request URL (an earlier run's destination), or not a URI on
                // this one's origin: nothing goes there; the upload starts over here.
                ignoreUploadURL("the upload URL '\(escapingControlCharacters(url))' kept in the spool was not learned from this request's URL: forgotten, the upload starts over")
                recordResumption(item.id, nil)
            }
        }
        if offersResumable {
            request.setHeader(ResumableUpload.versionField, ResumableUpload.version)
            request.setHeader("Upload-Complete", "?1")
        }
        let origin = request.url
        let answer = await transport.send(request, body: content.body(from: 0), timeout: configuration.timeout, progress: progress) {
            [weak self] status, headers in
            guard status == 104, let self, offersResumable else { return }
            switch ResumableUpload.location(in: headers, sentTo: origin) {
            case .none: break
            case .kept(let location): self.recordResumption(item.id, location, learnedFrom: origin)
            case .ignored(let reason): self.ignoreUploadURL(reason)
            }
        }
        if offersResumable { goPlainAfterAnUnreadableInterimAnswer(item.id, answer) }
        return Self.result(of: answer, attempted: progress.bytesSent > 0)
    }

    /// An interim answer whose head is too large to read (libcurl refuses a header line over
    /// 100 KiB, such as a 104's `Location`) ends the attempt, and would end every attempt that
    /// offers a resumable upload to that server: the item's next attempts in this run are plain
    /// uploads, and the upload URL is counted as ignored, as any unusable `Location` is.
    private func goPlainAfterAnUnreadableInterimAnswer(_ id: String, _ answer: Result<HTTPAnswer, HTTPFailure>) {
        guard case .failure(let failure) = answer, failure.code == EMSGSIZE, (100..<200).contains(failure.refusedHeadStatus) else { return }
        state.withLock { _ = $0.plainUploads.insert(id) }
        ignoreUploadURL("a \(failure.refusedHeadStatus) answer's head was larger than 100 KiB: not read, the next attempts are plain uploads")
    }

    /// The rest of an upload the server keeps at `url`: its offset, then the bytes after it. `nil`
    /// when the server no longer knows it (the whole content goes again, as a new upload).
    private func resume(_ item: SpooledItem, at url: String, _ request: DeliveryRequest, _ content: OpenedContent,
                        _ progress: TransferProgress) async -> AttemptResult? {
        var probe = DeliveryRequest(method: "HEAD", url: url, headers: request.headers)
        probe.setHeader("Content-Type", nil)
        probe.setHeader(ResumableUpload.versionField, ResumableUpload.version)
        let offsetAnswer = await transport.send(probe, body: .none, timeout: configuration.timeout)
        guard case .success(let answer) = offsetAnswer else { return Self.result(of: offsetAnswer, attempted: true) }
        if answer.status == 404 || answer.status == 410 {
            recordResumption(item.id, nil)
            return nil
        }
        guard (200..<300).contains(answer.status) else { return .answered(.status(answer.status, retryAfter: answer.header("Retry-After"))) }
        guard let offset = answer.header("Upload-Offset").flatMap(UInt64.init), offset <= UInt64(item.byteCount) else {
            recordResumption(item.id, nil)  // no usable offset: start over
            return nil
        }
        recordProgress(item.id, offset: offset)
        if offset == UInt64(item.byteCount) && answer.header("Upload-Complete") == "?1" {
            return .answered(.status(answer.status, retryAfter: nil))  // it arrived whole; its answer was lost
        }
        var append = DeliveryRequest(method: "PATCH", url: url, headers: request.headers)
        append.setHeader(ResumableUpload.versionField, ResumableUpload.version)
        append.setHeader("Content-Type", "application/partial-upload")
        append.setHeader("Upload-Offset", String(offset))
        append.setHeader("Upload-Complete", "?1")
        state.withLock { $0.flights[item.id]?.offset = offset }
        // A connection of its own: libcurl would send the append again by itself on a reused
        // connection the server closed, at an offset the first copy's bytes already moved (409).
        let appended = await transport.send(append, body: content.body(from: offset), timeout: configuration.timeout,
                                            progress: progress, freshConnection: true)
        goPlainAfterAnUnreadableInterimAnswer(item.id, appended)
        if case .success(let answer) = appended {
            switch answer.status {
            case 404, 410:
                recordResumption(item.id, nil)
                return .answered(.transportError("the server no longer keeps the upload (HTTP \(answer.status)): it starts over"))
            case 409:
                return .answered(.transportError("the server's offset of the upload moved (HTTP 409): asked again"))
            default: break
            }
        }
        return Self.result(of: appended, attempted: true)
    }

    /// Records (or forgets) where the server keeps an item's upload, and the request URL that
    /// learned it (the only one that may use it), durably, before the body goes on: a kill after
    /// this resumes there. A new upload starts from offset 0.
    private func recordResumption(_ id: String, _ url: String?, learnedFrom request: String? = nil) {
        state.withLock { state in
            guard var item = state.items[id], item.resumptionURL != url || item.resumptionRequestURL != request else { return }
            item.resumptionURL = url
            item.resumptionRequestURL = url == nil ? nil : request
            item.resumedOffset = 0
            state.items[id] = item
            try? state.spool.update(item)
        }
    }

    private func ignoreUploadURL(_ reason: String) {
        state.withLock { state in
            state.counters.ignoredUploadURLs += 1
            state.counters.lastIgnoredUploadURL = reason
        }
    }

    /// The server's offset grew past the highest it reported before: the attempts since moved the
    /// upload forward, and when by enough to be worth an attempt (``RetryPolicy/creditsProgress(from:to:of:)``),
    /// one is credited back (durably, with the offset).
    private func recordProgress(_ id: String, offset: UInt64) {
        state.withLock { state in
            guard var item = state.items[id], Int(clamping: offset) > item.resumedOffset else { return }
            if RetryPolicy.creditsProgress(from: item.resumedOffset, to: Int(clamping: offset), of: item.byteCount) {
                item.progressedAttempts = min(item.progressedAttempts + 1, item.attempts)
            }
            item.resumedOffset = Int(clamping: offset)
            state.items[id] = item
            try? state.spool.update(item)
        }
    }

    /// What an exchange came to. A failure of the exchange (an answer too large to read
    /// included) is a transport error of the attempt, retried; only a failure of the content's own
    /// (its check, or its reading) sets the item aside.
    private static func result(of answer: Result<HTTPAnswer, HTTPFailure>, attempted: Bool) -> AttemptResult {
        switch answer {
        case .success(let answer):
            return .answered(.status(answer.status, retryAfter: answer.header("Retry-After")))
        case .failure(let failure) where failure.isContentProblem:
            return .contentProblem(BodyProblem(quarantines: true, reason: failure.words, keepsContent: true), attempted: attempted)
        case .failure(let failure) where failure.code == ETIMEDOUT:
            return .answered(.timedOut)
        case .failure(let failure):
            return .answered(.transportError(failure.words))
        }
    }

    /// Why an item's content cannot be sent.
    struct BodyProblem: Error {
        /// Quarantine (the spool holds something else than content) or give up (it changed).
        var quarantines: Bool
        var reason: String
        /// Given up with its reason, its files kept in the spool's `quarantine/` (content that
        /// does not match its key: evidence, never sent; or the state of content that is gone).
        var keepsContent = false
    }

    /// An item's content, open: streamed from the spool by each attempt, checked against its key
    /// as it goes (logbook_content_check.h).
    struct OpenedContent {
        let fd: Int32
        let byteCount: Int
        let check: ContentCheck
        /// The spool holds the very file it was submitted from (`linking`), still at its path: a
        /// change is its owner's, so the item is given up but not quarantined (that would keep a
        /// link to the owner's file). Anything else that fails its key is evidence: quarantined.
        let isItsSourceFile: Bool

        func body(from offset: UInt64) -> HTTPBody {
            .file(fd: fd, offset: offset, contentLength: UInt64(byteCount), check: check)
        }
    }

    /// An item's content, opened in the spool with `O_NOFOLLOW` (a regular file only), with what
    /// can be checked before its first byte goes out: its size is the one submitted, and an archive
    /// file's header names the archive its key names. The rest (the SHA-256, the archive's frames)
    /// is checked as it streams, and the last bytes go out only once all of it passed.
    private func openContent(_ item: SpooledItem) -> Result<OpenedContent, BodyProblem> {
        let fd = state.withLock { $0.spool.openContent(item.id) }
        if fd == -ENOENT {
            return .failure(BodyProblem(quarantines: true, reason: Self.contentMissing(item), keepsContent: true))
        }
        if fd == -ELOOP || fd == -EINVAL {
            return .failure(BodyProblem(quarantines: true, reason: "its content in the spool is not a regular file"))
        }
        if fd < 0 {
            return .failure(BodyProblem(quarantines: false, reason: "its content cannot be opened: \(String(cString: strerror(-fd)))"))
        }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            let reason = "its content cannot be read: \(String(cString: strerror(errno)))"
            close(fd)
            return .failure(BodyProblem(quarantines: false, reason: reason))
        }
        let size = Int(status.st_size)
        var source = stat()
        let isItsSourceFile = !item.id.hasPrefix("lba-") && !item.source.isEmpty && status.st_nlink > 1
            && stat(item.source, &source) == 0 && source.st_dev == status.st_dev && source.st_ino == status.st_ino
        let check: ContentCheck
        if size != item.byteCount {
            close(fd)
            if isItsSourceFile {
                return .failure(BodyProblem(quarantines: false,
                                            reason: "the file changed after it was submitted (\(item.byteCount) bytes, now \(size))"))
            }
            return .failure(Self.mismatch("\(size) bytes, \(item.byteCount) submitted"))
        }
        if item.id.count == 64, let digest = SHA256.bytes(hex: item.id, lowercaseOnly: true) {
            check = .sha256(digest)
        } else if item.id.hasPrefix("lba-") {
            var start = [UInt8](repeating: 0, count: Int(LB_ZST_HEADER_FRAME_SIZE))
            let n = start.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0, let (header, prefixLength) = start.withUnsafeBytes({ Self.archiveHeaderAndLength(in: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }),
                  item.id == "lba-\(header.ring_created_wall_ns)-\(header.file_number)" else {
                close(fd)
                return .failure(Self.mismatch("not the archive file its key names"))
            }
            check = .archive(Array(start[0..<prefixLength]))
        } else {
            check = .size
        }
        return .success(OpenedContent(fd: fd, byteCount: size, check: check, isItsSourceFile: isItsSourceFile))
    }

    /// Why an item whose content is gone from the spool (deleted by someone else) is given up.
    static func contentMissing(_ item: SpooledItem) -> String {
        let source = item.source.isEmpty ? "" : " (submitted from \(escapingControlCharacters(item.source)))"
        return "its content is missing from the spool\(source): not sent, its state kept in quarantine/"
    }

    private static func mismatch(_ what: String) -> BodyProblem {
        BodyProblem(quarantines: true, reason: "its content in the spool is not what its key names (\(what)): not sent",
                    keepsContent: true)
    }

    /// An item whose content cannot be sent: quarantined, or given up. `attempted`: a request of
    /// it went out first, and counts as a failed attempt.
    private func setAside(_ item: SpooledItem, _ problem: BodyProblem, attempted: Bool = false) {
        state.withLock { state in
            state.inFlight.remove(item.id)
            if attempted {
                state.counters.attempts += 1
                state.counters.failedAttempts += 1
            }
            guard state.items[item.id] != nil else { return }
            if state.purging.remove(item.id) != nil {
                remove(item, from: &state, outcome: .dropped(id: item.id, reason: "purged"))
            } else if problem.keepsContent {
                state.items[item.id] = nil
                state.counters.gaveUp += 1
                state.counters.quarantined += 1
                try? state.spool.moveAside(item.id, to: "quarantine")
                report(.gaveUp(id: item.id, reason: problem.reason))
            } else if problem.quarantines {
                state.items[item.id] = nil
                state.counters.quarantined += 1
                try? state.spool.moveAside(item.id, to: "quarantine")
                report(.quarantined(id: item.id))
            } else {
                remove(item, from: &state, outcome: .gaveUp(id: item.id, reason: problem.reason))
            }
        }
    }

    private func settle(_ item: SpooledItem, _ outcome: AttemptOutcome) {
        var item = item
        item.attempts += 1
        let now = configuration.clock()
        var random = SystemRandomness()
        // Attempts that moved the upload forward by enough do not count (recorded during this
        // attempt); all attempts together are bounded still (the policy's maxAttemptsInAll).
        let progressed = state.withLock { $0.items[item.id]?.progressedAttempts } ?? item.progressedAttempts
        let decision = configuration.policy.decide(outcome, attempt: max(1, item.attempts - progressed),
                                                   attemptsInAll: item.attempts,
                                                   firstSubmittedNanoseconds: item.firstSubmittedNanoseconds,
                                                   nowNanoseconds: now, using: &random)
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
        state.withLock { state in
            state.inFlight.remove(item.id)
            state.counters.attempts += 1
            if decision != .delivered { state.counters.failedAttempts += 1 }
            // Dropped by the quota while it was in flight: nothing of it is left to update.
            guard state.items[item.id] != nil else { return }
            if state.purging.remove(item.id) != nil && decision != .delivered {
                remove(item, from: &state, outcome: .dropped(id: item.id, reason: "purged"))
                return
            }
            switch decision {
            case .delivered:
                state.spool.markDelivered(item, to: configuration.destination)
                remove(item, from: &state, outcome: .delivered(id: item.id, attempts: item.attempts))
            case .gaveUp(let reason):
                remove(item, from: &state, outcome: .gaveUp(id: item.id, reason: reason))
            case .expired:
                remove(item, from: &state, outcome: .expired(id: item.id))
            case .retry(let at):
                item.nextAttemptNanoseconds = at
                if let current = state.items[item.id] {  // recorded during the attempt
                    item.resumptionURL = current.resumptionURL
                    item.resumptionRequestURL = current.resumptionRequestURL
                    item.resumedOffset = current.resumedOffset
                    item.progressedAttempts = current.progressedAttempts
                }
                state.items[item.id] = item
                do {
                    try state.spool.update(item)
                } catch {
                    // The spool cannot record the attempt (e.g. the disk is full): the item keeps
                    // its old state on disk, so a relaunch retries it sooner, never loses it.
                }
            }
        }
    }

    /// The item leaves the queue and the spool (moved to `given-up/` when so configured): only
    /// after the server's answer, its expiry, the quota or a purge. Counted and reported.
    private func remove(_ item: SpooledItem, from state: inout State, outcome: Outcome) {
        state.items[item.id] = nil
        switch outcome {
        case .delivered:
            state.counters.delivered += 1
            state.counters.deliveredBytes += item.byteCount
        case .gaveUp: state.counters.gaveUp += 1
        case .expired: state.counters.expired += 1
        case .dropped: state.counters.dropped += 1
        case .quarantined, .notSubmitted: break
        }
        do {
            if case .gaveUp = outcome, configuration.keepsGivenUpItems {
                try state.spool.moveAside(item.id, to: "given-up")
            } else {
                try state.spool.remove(item.id)
            }
        } catch {
            // Left on disk: the next launch finds it again and settles it then.
        }
        report(outcome)
    }

    private func report(_ outcome: Outcome) {
        outcomeSink.yield(outcome)
    }
}

// MARK: archive files

extension Uploader {
    /// The identifier of an archive file: `lba-RING-NUMBER`, from its header (the ring's creation
    /// time and the file's number), stable across launches and unique per bundle, without reading
    /// the whole file.
    public static func archiveIdentifier(ofFile path: String) throws(LogbookError) -> String {
        let fd = try systemCall(.file, "open", path: path) { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW) }
        defer { close(fd) }
        // The header: at the start, or after the 8 bytes of a zstd skippable frame's head (.lba.zst).
        var start = [UInt8](repeating: 0, count: 8 + MemoryLayout<lb_archive_file_header>.size)
        let n = start.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0, let header = start.withUnsafeBytes({ Self.archiveHeader(in: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) else {
            throw LogbookError(subject: .uploader, operation: "Uploader.archiveIdentifier", path: path, errno: EPROTO,
                               detail: "not a Logbook archive file (its header is missing or damaged)")
        }
        return "lba-\(header.ring_created_wall_ns)-\(header.file_number)"
    }

    /// The header at the start of an archive file's bytes (after a zstd skippable frame's head in
    /// a compressed one), if its magic and CRC are right.
    static func archiveHeader(in bytes: UnsafeRawBufferPointer) -> lb_archive_file_header? {
        archiveHeaderAndLength(in: bytes)?.header
    }

    /// The header, and how many bytes from the start hold it (64, or 72 after a skippable head).
    static func archiveHeaderAndLength(in bytes: UnsafeRawBufferPointer) -> (header: lb_archive_file_header, length: Int)? {
        let size = MemoryLayout<lb_archive_file_header>.size
        var at = 0
        if bytes.count >= 4 && UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self)) == LB_ZST_SKIPPABLE_MAGIC { at = 8 }
        guard bytes.count >= at + size else { return nil }
        var header = lb_archive_file_header()
        withUnsafeMutableBytes(of: &header) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[at..<(at + size)])) }
        let magicMatches = withUnsafeBytes(of: header.magic) { Array($0) == Array(LB_ARCHIVE_MAGIC.utf8) }
        let crc = withUnsafeBytes(of: &header) { lb_crc32c(0, $0.baseAddress, MemoryLayout<lb_archive_file_header>.offset(of: \.header_crc)!) }
        return magicMatches && crc == header.header_crc ? (header, at + size) : nil
    }

    /// For `ArchiveOptions.onFileRolled`: puts a file the archiver just completed into the spool
    /// before the callback returns, so that the archiver's retention, which runs after it, cannot
    /// delete it first. A failure (e.g. the spool's disk is full) is reported as
    /// ``Outcome/notSubmitted(path:reason:)``; the file stays in the archive directory (unless
    /// retention deletes it) for ``submitArchives(in:includingDelivered:)`` on the next launch.
    public func submit(archive: ArchivedFile) {
        do {
            _ = try spool(file: archive.path, id: try Self.archiveIdentifier(ofFile: archive.path), linking: true)
        } catch {
            state.withLock { $0.counters.notSubmitted += 1 }
            report(.notSubmitted(path: archive.path, reason: error.description))
        }
    }

    /// Submits the complete archive files of a bundle (`NAME.logbook`) or an archive directory,
    /// oldest first, except those delivered before (marked with the extended attribute
    /// `user.logbook.delivered`, or in the spool's `delivered/` where the file system has no
    /// user attributes; unless `includingDelivered`) and those already spooled. Returns the items
    /// submitted.
    @discardableResult
    public func submitArchives(in path: String, includingDelivered: Bool = false) throws(LogbookError) -> [SpooledItem] {
        var directory = path
        var status = stat()
        if stat(path + "/archive", &status) == 0 && status.st_mode & S_IFMT == S_IFDIR { directory = path + "/archive" }
        let fd = lb_dir_open_private(directory, "archive directory", 0)
        try check(fd, .file, "lb_dir_open_private", path: directory, detailed: true)
        close(fd)
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let isBundle = directory != path || files.contains("ring")
        guard isBundle || files.contains(where: { $0.hasPrefix("archive-") && $0.contains(".lba") }) else {
            throw LogbookError(subject: .uploader, operation: "Uploader.submitArchives", path: path, errno: EINVAL,
                               detail: "neither a bundle nor a directory of archive files")
        }
        var submitted: [SpooledItem] = []
        var seen: [String: Set<String>] = [:]  // ring prefix -> ids present
        // A .lba beside its .lba.zst (compressed a moment ago) is the same item: the .zst goes.
        let complete = Set(files.filter(Self.isCompleteArchiveName))
        for name in complete.filter({ !complete.contains($0 + ".zst") }).sorted() {
            let file = directory + "/" + name
            // One bad entry (a symlink, a FIFO, a damaged header) is reported on its own; the
            // others are submitted by this call, not by a later run.
            let id: String
            do throws(LogbookError) {
                var entry = stat()
                guard lstat(file, &entry) == 0, entry.st_mode & S_IFMT == S_IFREG else {
                    throw LogbookError(subject: .uploader, operation: "Uploader.submitArchives", path: file, errno: EINVAL,
                                       detail: "not a regular file (a symbolic link, FIFO or directory): not uploaded")
                }
                id = try Self.archiveIdentifier(ofFile: file)
            } catch {
                state.withLock { $0.counters.notSubmitted += 1 }
                report(.notSubmitted(path: file, reason: error.description))
                continue
            }
            let prefix = String(id[..<id.lastIndex(of: "-")!]) + "-"
            seen[prefix, default: []].insert(id)
            let known = state.withLock { $0.items[id] != nil || (!includingDelivered && $0.spool.wasDelivered(file: file, id: id, to: configuration.destination)) }
            if !known { submitted.append(try spool(file: file, id: id, linking: true)) }
        }
        state.withLock { state in
            for (prefix, ids) in seen { state.spool.pruneDeliveryMarks(prefix: prefix, keep: ids) }
        }
        return submitted
    }

    /// A complete archive file's name, compressed or not (not `.writing`, not `.unsynced`), by
    /// the core's one rule.
    static func isCompleteArchiveName(_ name: String) -> Bool {
        var number: UInt64 = 0
        let kind = lb_archive_name_parse(name, &number)
        return kind == LB_ARCHIVE_NAME_COMPLETE || kind == LB_ARCHIVE_NAME_COMPRESSED
    }
}

/// The system's generator (stateless, safe on any thread) with a stored field: ThreadSanitizer
/// (Swift 6.3) crashes on an `inout` access to a zero-sized value such as
/// `SystemRandomNumberGenerator` itself.
package struct SystemRandomness: RandomNumberGenerator {
    private var unused: UInt8 = 0

    package init() {}

    package mutating func next() -> UInt64 { UInt64.random(in: .min ... .max) }
}

/// Wakes idle workers: a submission, a change of consent or a stop. A waiter passes the generation
/// it saw before looking for work, so that a signal in between is never lost.
final class Wakeup: Sendable {
    private let state = Locked<(generation: UInt64, waiters: [UInt64: CheckedContinuation<Void, Never>], next: UInt64)>((0, [:], 0))

    var generation: UInt64 { state.withLock { $0.generation } }

    func signal() {
        let waiters = state.withLock { state in
            state.generation &+= 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns at a signal after `generation`, after `timeout`, or when the task is cancelled.
    func wait(ifStill generation: UInt64, upTo timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: timeout) }
            group.addTask { [self] in await waitForSignal(after: generation) }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForSignal(after generation: UInt64) async {
        let key = state.withLock { state in
            state.next += 1
            return state.next
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.generation != generation || Task.isCancelled { return true }
                    state.waiters[key] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: key) }?.resume()
        }
    }
}
