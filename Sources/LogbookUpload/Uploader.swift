import CLogbook
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
/// ```swift
/// let uploader = try Uploader(.init(spool: "/var/lib/app/upload-spool") { item in
///     var request = URLRequest(url: URL(string: "https://logs.example.com/v1/files/\(item.id)")!)
///     request.httpMethod = "PUT"
///     return request
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
        /// How long an attempt may go without progress (connecting, sending, waiting for the
        /// answer) before it counts as timed out.
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
        public var makeRequest: @Sendable (SpooledItem) -> URLRequest
        /// The wall clock (ns since the epoch); tests inject one.
        public var clock: @Sendable () -> Int64
        /// Where the items go, in words (the CLI passes its `--to` URL): delivery marks are per
        /// destination, so a file delivered to one is still submitted for another. "" is the
        /// destination of marks made before marks had one.
        public var destination: String

        public init(spool: String, policy: RetryPolicy = .fileUpload, maxConcurrentUploads: Int = 2,
                    timeout: Duration = .seconds(60), quota: Quota = Quota(), keepsGivenUpItems: Bool = false,
                    isAllowed: Bool = true, destination: String = "",
                    clock: @escaping @Sendable () -> Int64 = Spool.wallClock,
                    makeRequest: @escaping @Sendable (SpooledItem) -> URLRequest) {
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
        /// Not retryable (a status such as 400, or the attempts ran out); the reason says which.
        case gaveUp(id: String, reason: String)
        /// Its expiry passed before it could be delivered.
        case expired(id: String)
        /// Removed unsent: by the quota (the oldest first) or by ``Uploader/purge()``.
        case dropped(id: String, reason: String)
        /// Its state file was damaged: moved to the spool's `quarantine/`, not uploaded.
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
    }

    public let configuration: Configuration
    /// Every outcome, in the order they happen (the newest 4096 are kept for a slow reader;
    /// ``statistics`` counts them all).
    public let outcomes: AsyncStream<Outcome>
    private let outcomeSink: AsyncStream<Outcome>.Continuation
    private let state: Locked<State>
    private let wakeup = Wakeup()
    private let sessionConfiguration: URLSessionConfiguration
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
    }

    /// Opens the spool (throws when another process uses it) and resumes every item it holds.
    public init(_ configuration: Configuration) throws(LogbookError) {
        self.configuration = configuration
        let spool = try Spool(path: configuration.spool, clock: configuration.clock)
        let contents = try spool.contents()
        state = Locked(State(spool: spool, items: Dictionary(uniqueKeysWithValues: contents.items.map { ($0.id, $0) }),
                             allowed: configuration.isAllowed))
        (outcomes, outcomeSink) = AsyncStream.makeStream(of: Outcome.self, bufferingPolicy: .bufferingNewest(4096))
        sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = seconds(configuration.timeout)
        for id in contents.quarantined { report(.quarantined(id: id)) }
        state.withLock { state in
            state.counters.quarantined = contents.quarantined.count
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
            throw LogbookError(operation: "Uploader.submit", path: configuration.spool, errno: EINVAL,
                               detail: "item identifier '\(id)' has the shape of Logbook's own (64 hex digits, or lba-…): choose another")
        }
    }

    /// Like ``submit(file:id:linking:)``, unless this file was delivered before under the same id (its
    /// delivery mark, see ``submitArchives(in:includingDelivered:)``): then nothing is submitted and the result is `nil`.
    /// Running the same upload twice then sends nothing twice.
    public func submitUnlessDelivered(file: String, id: String? = nil) throws(LogbookError) -> SpooledItem? {
        try requireCallersIdentifier(id)
        try requireWithinQuota(try Spool.byteCount(ofFile: file), file)  // before hashing a file too large
        let id = if let id { id } else if let (archive, _) = Self.archiveIdentity(file), let archive { archive }
                 else { try Spool.contentIdentifier(ofFile: file) }
        let delivered = state.withLock { $0.items[id] == nil && $0.spool.wasDelivered(file: file, id: id, to: configuration.destination) }
        return delivered ? nil : try spool(file: file, id: id, linking: false)
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
            throw LogbookError(operation: "Uploader.submit", path: file ?? configuration.spool, errno: EFBIG,
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
            let body: Data
            switch loadBody(item) {
            case .success(let content): body = content
            case .failure(let problem):
                setAside(item, problem)
                return .worked
            }
            let outcome = await attempt(item, body: body)
            if Task.isCancelled {
                state.withLock { state in  // stopped: its state stays as it was
                    state.inFlight.remove(item.id)
                    if state.purging.remove(item.id) != nil, state.items[item.id] != nil {
                        remove(item, from: &state, outcome: .dropped(id: item.id, reason: "purged"))
                    }
                }
                return .worked
            }
            settle(item, outcome)
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

    private func attempt(_ item: SpooledItem, body: Data) async -> AttemptOutcome {
        var request = configuration.makeRequest(item)
        request.setValue("\"\(item.id)\"", forHTTPHeaderField: "Idempotency-Key")
        request.setValue(String(item.attempts + 1), forHTTPHeaderField: "Logbook-Attempt")
        // The body's framing is the transport's: a Content-Length of the caller's would cut the
        // body short (and the rest would be read as another request on the connection).
        request.setValue(nil, forHTTPHeaderField: "Content-Length")
        request.setValue(nil, forHTTPHeaderField: "Transfer-Encoding")
        request.httpBody = nil
        request.timeoutInterval = seconds(configuration.timeout)
        do {
            // A Data body, never upload(fromFile:): FoundationNetworking traps the process on a
            // connection reset in the middle of a file body (measured; docs/ARCHITECTURE.md).
            // A session of its own per attempt (HTTPExchange): measured, libcurl's own retry on a
            // reused connection hung until the timeout, or sent an empty body that a server accepted.
            let (_, response) = try await HTTPExchange.send(request, body: body, configuration: sessionConfiguration)
            guard let http = response as? HTTPURLResponse else { return .transportError("not an HTTP response") }
            return .status(http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        } catch let error as URLError where error.code == .timedOut {
            return .timedOut
        } catch let error as URLError {
            return .transportError(Self.describe(error))
        } catch {
            return .transportError(String(describing: error))
        }
    }

    /// A transport failure in words, with its URLError code.
    package static func describe(_ error: URLError) -> String {
        let words: String
        switch error.code {
        case .networkConnectionLost: words = "the connection was lost"
        case .cannotConnectToHost: words = "could not connect to the server"
        case .cannotFindHost, .dnsLookupFailed: words = "the server's name did not resolve"
        case .notConnectedToInternet: words = "no network"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot:
            words = "the TLS connection failed"
        case .badServerResponse: words = "the server's response was malformed"
        case .cancelled: words = "cancelled"
        default: words = "transport error"
        }
        return "\(words) (URLError \(error.code.rawValue))"
    }

    /// Why an item's content cannot be sent.
    struct BodyProblem: Error {
        /// Quarantine (the spool holds something else than content) or give up (it changed).
        var quarantines: Bool
        var reason: String
        /// Given up with its reason, its content kept in the spool's `quarantine/` (content that
        /// does not match its key: evidence, never sent).
        var keepsContent = false
    }

    /// An item's content, opened in the spool with `O_NOFOLLOW` (a regular file only): mapped when
    /// the spool alone holds the file; read into memory when a hard link shares it (its other owner
    /// could truncate a mapping under us), after checking that its size is still the one submitted.
    private func loadBody(_ item: SpooledItem) -> Result<Data, BodyProblem> {
        let fd = state.withLock { $0.spool.openContent(item.id) }
        if fd == -ELOOP || fd == -EINVAL || fd == -ENOENT {
            return .failure(BodyProblem(quarantines: true, reason: "its content in the spool is not a regular file"))
        }
        if fd < 0 {
            return .failure(BodyProblem(quarantines: false, reason: "its content cannot be opened: \(String(cString: strerror(-fd)))"))
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            return .failure(BodyProblem(quarantines: false, reason: "its content cannot be read: \(String(cString: strerror(errno)))"))
        }
        let size = Int(status.st_size)
        if item.id.hasPrefix("lba-"), let problem = Self.archiveProblem(fd) { return .failure(problem) }
        if status.st_nlink > 1 && size != item.byteCount {
            return .failure(BodyProblem(quarantines: false,
                                        reason: "the file changed after it was submitted (\(item.byteCount) bytes, now \(size))"))
        }
        if size == 0 { return Self.matchesItsKey(Data(), item).map { .failure($0) } ?? .success(Data()) }
        if status.st_nlink == 1, let mapping = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), mapping != MAP_FAILED {
            let data = Data(bytesNoCopy: mapping, count: size, deallocator: .custom { pointer, count in
                munmap(pointer, count)
            })
            return Self.matchesItsKey(data, item).map { .failure($0) } ?? .success(data)
        }
        var data = Data(count: size)
        let read = data.withUnsafeMutableBytes { buffer -> Int in
            var offset = 0
            while offset < size {
                let n = pread(fd, buffer.baseAddress! + offset, size - offset, off_t(offset))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                offset += n
            }
            return offset
        }
        guard read == size else {
            return .failure(BodyProblem(quarantines: false, reason: "the file changed after it was submitted (\(size) bytes, read \(read))"))
        }
        return Self.matchesItsKey(data, item).map { .failure($0) } ?? .success(data)
    }

    /// An archive file whose frames fail their checks (an edit of the same size: the outside test
    /// sent one under its key), read through the core's reader over the very inode opened: the
    /// first problem, or nil when it reads whole.
    static func archiveProblem(_ fd: Int32) -> BodyProblem? {
        let failures: [LogIssue]
        do {
            let reader = try LogReader(path: "/proc/self/fd/\(fd)")
            try reader.stream { _ in }
            failures = reader.issues.filter(\.isFailure)
        } catch {
            return BodyProblem(quarantines: true, reason: "its content in the spool is not a readable archive file (\(error)): not sent",
                               keepsContent: true)
        }
        guard let first = failures.first else { return nil }
        return BodyProblem(quarantines: true,
                           reason: "its content in the spool is not the archive file its key names (\(first.kind) at byte \(first.offset): \(first.reason)): not sent",
                           keepsContent: true)
    }

    /// Whether the bytes about to be sent are the content the item's key names (outside tests
    /// sent a cut spool file, and a hard link to another file, under the key of the content
    /// submitted): the size submitted; for Logbook's own keys the SHA-256 of the bytes, or an
    /// archive file's header (its ring and number). A caller's own id names no content to check.
    static func matchesItsKey(_ data: Data, _ item: SpooledItem) -> BodyProblem? {
        func mismatch(_ what: String) -> BodyProblem {
            BodyProblem(quarantines: true, reason: "its content in the spool is not what its key names (\(what)): not sent",
                        keepsContent: true)
        }
        if data.count != item.byteCount { return mismatch("\(data.count) bytes, \(item.byteCount) submitted") }
        if item.id.count == 64, item.id.allSatisfy(\.isHexDigit) {
            var hasher = SHA256()
            data.withUnsafeBytes { hasher.update($0) }
            if SHA256.hex(hasher.finish()) != item.id { return mismatch("another SHA-256") }
        } else if item.id.hasPrefix("lba-") {
            let header = data.withUnsafeBytes { Self.archiveHeader(in: $0) }
            guard let header, item.id == "lba-\(header.ring_created_wall_ns)-\(header.file_number)" else {
                return mismatch("not the archive file its key names")
            }
        }
        return nil
    }

    /// An item whose content cannot be sent: quarantined, or given up.
    private func setAside(_ item: SpooledItem, _ problem: BodyProblem) {
        state.withLock { state in
            state.inFlight.remove(item.id)
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
        let decision = configuration.policy.decide(outcome, attempt: item.attempts,
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
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
        if fd < 0 { throw LogbookError(operation: "open", path: path, errno: errno) }
        defer { close(fd) }
        // The header: at the start, or after the 8 bytes of a zstd skippable frame's head (.lba.zst).
        var start = [UInt8](repeating: 0, count: 8 + MemoryLayout<lb_archive_file_header>.size)
        let n = start.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0, let header = start.withUnsafeBytes({ Self.archiveHeader(in: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) else {
            throw LogbookError(operation: "Uploader.archiveIdentifier", path: path, errno: EPROTO,
                               detail: "not a Logbook archive file (its header is missing or damaged)")
        }
        return "lba-\(header.ring_created_wall_ns)-\(header.file_number)"
    }

    /// The header at the start of an archive file's bytes (after a zstd skippable frame's head in
    /// a compressed one), if its magic and CRC are right.
    static func archiveHeader(in bytes: UnsafeRawBufferPointer) -> lb_archive_file_header? {
        let size = MemoryLayout<lb_archive_file_header>.size
        var at = 0
        if bytes.count >= 4 && UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self)) == LB_ZST_SKIPPABLE_MAGIC { at = 8 }
        guard bytes.count >= at + size else { return nil }
        var header = lb_archive_file_header()
        withUnsafeMutableBytes(of: &header) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[at..<(at + size)])) }
        let magicMatches = withUnsafeBytes(of: header.magic) { Array($0) == Array(LB_ARCHIVE_MAGIC.utf8) }
        let crc = withUnsafeBytes(of: &header) { lb_crc32c(0, $0.baseAddress, MemoryLayout<lb_archive_file_header>.offset(of: \.header_crc)!) }
        return magicMatches && crc == header.header_crc ? header : nil
    }

    /// For `ArchiveOptions.onFileRolled`: puts a file the archiver just completed into the spool
    /// before the callback returns, so that the archiver's retention, which runs after it, cannot
    /// delete it first. A failure (e.g. the spool's disk is full) is reported as
    /// ``Outcome/notSubmitted(path:reason:)``; the file stays in the archive directory (unless
    /// retention deletes it) for ``submitArchives(in:includingDelivered:)`` on the next launch.
    public func submit(archive: ArchivedFile) {
        do {
            try spool(file: archive.path, id: try Self.archiveIdentifier(ofFile: archive.path), linking: true)
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
        try check(fd, "lb_dir_open_private", path: directory, detailed: true)
        close(fd)
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let isBundle = directory != path || files.contains("ring")
        guard isBundle || files.contains(where: { $0.hasPrefix("archive-") && $0.contains(".lba") }) else {
            throw LogbookError(operation: "Uploader.submitArchives", path: path, errno: EINVAL,
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
                    throw LogbookError(operation: "Uploader.submitArchives", path: file, errno: EINVAL,
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

/// Redirects are not followed: a 301, 302 or 303 would turn the PUT or POST into a GET without the
/// body, and its 200 would pass for a delivery. The 3xx itself is the answer, and the policy gives
/// up on it with the status as the reason (the request should name the final URL).
package final class RedirectRefusal: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    package override init() { super.init() }
    package func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        completionHandler(nil)
    }
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

private func seconds(_ duration: Duration) -> Double {
    Double(nanoseconds(duration)) / 1e9
}
