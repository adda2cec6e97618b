/// When a failed delivery is tried again, and when it is given up: the one retry engine of the
/// uploader and the exporters. Pure decisions over times in nanoseconds since the Unix epoch, so
/// that tests inject the clock and the randomness and never wait.
///
/// Defaults, and why:
/// - Retried: transport errors and timeouts, and the statuses that say "later" (408, 425, 429,
///   500, 502, 503, 504). Any other status (400, 401, 403, 404, 413, 422, …) gives up at once: the
///   same request would get the same answer.
/// - Exponential backoff with full jitter (a random wait between 0 and `baseDelay × 2^(attempt−1)`,
///   at most `maxDelay`): clients that failed together do not come back together.
/// - `Retry-After` (delay-seconds or any HTTP-date form) is honoured: never earlier than it says,
///   up to `maxRetryAfter` (1 hour), a longer one is cut to that (a date after 2262, past Int64
///   nanoseconds, included). A date in the past or a value that is neither form falls back to the
///   backoff.
/// - At most `maxAttempts` attempts (20), and never past `expiry` after the first submission (2
///   days): what cannot be delivered in that time is reported as expired, not retried forever.
/// - A resumable upload's attempt that moved the server's offset forward by enough to be worth an
///   attempt (``creditsProgress(from:to:of:)``: 1 MiB, or an eighth of what remained) does not
///   count toward `maxAttempts`, so that a link that breaks every few megabytes still delivers a
///   large file; but no item gets more than ``maxAttemptsInAll`` (10 × `maxAttempts`) attempts in
///   all, whatever the server does.
/// - No wait is longer than ``longestWait(afterAttempt:lastStatus:)``: the backoff's bound after
///   that attempt, or `maxRetryAfter` after an HTTP answer (its `Retry-After`). A next attempt
///   stored farther ahead (the wall clock was set back) is brought back to it.
public struct RetryPolicy: Sendable, Equatable {
    /// HTTP statuses that are tried again.
    public var retryableStatuses: Set<Int>
    /// Whether a transport error (connection refused or reset, DNS, TLS) or a timeout is tried again.
    public var retriesTransportErrors: Bool
    /// The first backoff's upper bound; doubled per attempt.
    public var baseDelay: Duration
    /// The largest backoff.
    public var maxDelay: Duration
    /// The longest `Retry-After` honoured; a longer one is cut to this.
    public var maxRetryAfter: Duration
    /// Attempts before giving up (the first included); those credited for moving a resumable
    /// upload forward do not count, up to ``maxAttemptsInAll``.
    public var maxAttempts: Int
    /// How long after its first submission an item may still be delivered.
    public var expiry: Duration

    public init(
        retryableStatuses: Set<Int> = [408, 425, 429, 500, 502, 503, 504],
        retriesTransportErrors: Bool = true,
        baseDelay: Duration = .seconds(1),
        maxDelay: Duration = .seconds(300),
        maxRetryAfter: Duration = .seconds(3600),
        maxAttempts: Int = 20,
        expiry: Duration = .seconds(2 * 86_400)
    ) {
        self.retryableStatuses = retryableStatuses
        self.retriesTransportErrors = retriesTransportErrors
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxRetryAfter = maxRetryAfter
        self.maxAttempts = maxAttempts
        self.expiry = expiry
    }

    /// File uploads: the defaults.
    public static let fileUpload = RetryPolicy()

    /// OpenTelemetry exporters (OTLP/HTTP): only 429, 502, 503 and 504 are retryable, as the OTLP
    /// specification says; a 500 is not.
    public static let openTelemetry = RetryPolicy(retryableStatuses: [429, 502, 503, 504])
}

/// What one attempt came to.
public enum AttemptOutcome: Sendable, Equatable {
    /// The server answered; `retryAfter` is its `Retry-After` header, if any.
    case status(Int, retryAfter: String?)
    /// No answer: refused, reset, DNS, TLS; the text says which.
    case transportError(String)
    /// No answer in time.
    case timedOut
}

/// What to do with an item after an attempt.
public enum RetryDecision: Sendable, Equatable {
    /// A 2xx: the item may go.
    case delivered
    /// Try again at this time (ns since the epoch).
    case retry(atNanoseconds: Int64)
    /// Never again: the reason names the status or the limit.
    case gaveUp(reason: String)
    /// Its expiry passed before it could be delivered.
    case expired
}

extension RetryPolicy {
    /// How many times `maxAttempts` all attempts of an item may be, those credited for progress
    /// included.
    public static let attemptsInAllFactor = 10

    /// The most attempts an item gets in all, those that moved a resumable upload forward
    /// included: 10 × ``maxAttempts``.
    public var maxAttemptsInAll: Int {
        let (product, overflow) = maxAttempts.multipliedReportingOverflow(by: Self.attemptsInAllFactor)
        return overflow ? Int.max : product
    }

    /// Progress worth an attempt's cost: at least this many bytes...
    public static let creditedProgressBytes = 1 << 20
    /// ...or at least this fraction (1/8) of the bytes that remained.
    public static let creditedProgressDivisor = 8

    /// Whether a resumable upload whose server's offset moved from `before` to `after` (of
    /// `byteCount` bytes) moved forward by enough that the attempt does not count toward
    /// ``maxAttempts``: at least 1 MiB, or an eighth of what remained. A server that keeps a byte
    /// per attempt earns nothing (the fourth outside test: 55 attempts in 30 s from
    /// `--max-attempts 4`, and about 2 million for 3 MB, while each byte counted as progress).
    public static func creditsProgress(from before: Int, to after: Int, of byteCount: Int) -> Bool {
        guard after > before else { return false }
        let moved = after - before, remained = max(0, byteCount - before)
        return moved >= creditedProgressBytes || moved * creditedProgressDivisor >= remained
    }

    /// The longest wait this policy can ask after attempt number `attempt` (counted as in
    /// ``decide(_:attempt:attemptsInAll:firstSubmittedNanoseconds:nowNanoseconds:using:)``; 0:
    /// none yet, so no wait) whose outcome had the HTTP status `lastStatus` (0 or less: no
    /// answer), in nanoseconds: the backoff's bound, or after an answer `maxRetryAfter` if longer
    /// (its `Retry-After` may have asked for that).
    public func longestWait(afterAttempt attempt: Int, lastStatus: Int) -> Int64 {
        guard attempt > 0 else { return 0 }
        let backoffBound = backoffBound(afterAttempt: attempt)
        return lastStatus > 0 ? max(backoffBound, nanoseconds(maxRetryAfter)) : backoffBound
    }

    /// The decision after attempt number `attempt` (1 for the first; the attempts that count) of
    /// an item first submitted at `firstSubmittedNanoseconds`, at `nowNanoseconds`.
    /// `attemptsInAll`, when attempts were credited for progress: every attempt made, bounded by
    /// ``maxAttemptsInAll``.
    public func decide(
        _ outcome: AttemptOutcome, attempt: Int, attemptsInAll: Int? = nil, firstSubmittedNanoseconds: Int64, nowNanoseconds: Int64,
        using random: inout some RandomNumberGenerator
    ) -> RetryDecision {
        let lastFailure: String
        var retryAfterNanoseconds: Int64?
        switch outcome {
        case .status(let status, let retryAfter):
            if (200..<300).contains(status) { return .delivered }
            guard retryableStatuses.contains(status) else { return .gaveUp(reason: "HTTP \(status)") }
            lastFailure = "HTTP \(status)"
            retryAfterNanoseconds = retryAfter.flatMap { Self.retryAfterDelay($0, nowNanoseconds: nowNanoseconds) }
        case .transportError(let text):
            guard retriesTransportErrors else { return .gaveUp(reason: text) }
            lastFailure = text
        case .timedOut:
            guard retriesTransportErrors else { return .gaveUp(reason: "timed out") }
            lastFailure = "timed out"
        }
        if attempt >= maxAttempts {
            return .gaveUp(reason: "\(attempt) attempts, the last: \(lastFailure)")
        }
        if let attemptsInAll, attemptsInAll >= maxAttemptsInAll {
            return .gaveUp(reason: "\(attemptsInAll) attempts in all (\(attemptsInAll - attempt) that moved the upload forward did not count), the last: \(lastFailure)")
        }
        var delay = backoff(afterAttempt: attempt, using: &random)
        if let retryAfterNanoseconds {
            delay = max(delay, min(retryAfterNanoseconds, nanoseconds(maxRetryAfter)))
        }
        let (next, overflow) = nowNanoseconds.addingReportingOverflow(delay)
        let (deadline, late) = firstSubmittedNanoseconds.addingReportingOverflow(nanoseconds(expiry))
        if overflow || (!late && next > deadline) { return .expired }
        return .retry(atNanoseconds: next)
    }

    /// Whether an item first submitted then is past its expiry now (checked before each attempt).
    public func isExpired(firstSubmittedNanoseconds: Int64, nowNanoseconds: Int64) -> Bool {
        let (deadline, late) = firstSubmittedNanoseconds.addingReportingOverflow(nanoseconds(expiry))
        return !late && nowNanoseconds > deadline
    }

    /// Full jitter: uniformly random in 0...min(maxDelay, baseDelay × 2^(attempt−1)).
    public func backoff(afterAttempt attempt: Int, using random: inout some RandomNumberGenerator) -> Int64 {
        let bound = backoffBound(afterAttempt: attempt)
        return bound > 0 ? Int64.random(in: 0...bound, using: &random) : 0
    }

    /// min(maxDelay, baseDelay × 2^(attempt−1)), in nanoseconds.
    func backoffBound(afterAttempt attempt: Int) -> Int64 {
        let base = nanoseconds(baseDelay), cap = nanoseconds(maxDelay)
        let shift = min(max(attempt - 1, 0), 62)
        let (scaled, overflow) = base.multipliedReportingOverflow(by: Int64(1) << shift)
        return max(0, overflow || scaled > cap ? cap : scaled)
    }

    /// A `Retry-After` value as a delay from now in nanoseconds: delay-seconds, or an HTTP-date
    /// in the future; `nil` for a date in the past (or now) and for anything else. A value beyond
    /// Int64 nanoseconds (more seconds than that, or a date after 2262) is `Int64.max`: very far
    /// ahead, which the caller cuts to `maxRetryAfter`.
    public static func retryAfterDelay(_ value: String, nowNanoseconds: Int64) -> Int64? {
        let text = value.trimmingSpaces()
        if !text.isEmpty, text.utf8.allSatisfy({ (48...57).contains($0) }) {
            // 1*DIGIT; a value too large for Int64 nanoseconds is "very long": the caller caps it.
            guard let seconds = Int64(text), seconds <= Int64.max / 1_000_000_000 else { return Int64.max }
            return seconds * 1_000_000_000
        }
        let nowSeconds = nowNanoseconds / 1_000_000_000
        guard let date = HTTPDate.parse(text, nowSeconds: nowSeconds) else { return nil }
        // Past 2262-04-11 a date has no Int64 nanoseconds: it is far in the future, not garbage
        // (an outside test saw year 9999 and 2263 retried at once); before 1677, far in the past.
        guard date < Int64.max / 1_000_000_000 else { return Int64.max }
        guard date > Int64.min / 1_000_000_000 else { return nil }
        let dateNanoseconds = date * 1_000_000_000
        guard dateNanoseconds > nowNanoseconds else { return nil }
        let (delay, overflow) = dateNanoseconds.subtractingReportingOverflow(nowNanoseconds)
        return overflow ? Int64.max : delay
    }
}

func nanoseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return seconds < 0 ? Int64.min : Int64.max }
    let (sum, late) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
    return late ? Int64.max : sum
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        let bytes = Array(utf8)
        var start = 0, end = bytes.count
        while start < end && (bytes[start] == 32 || bytes[start] == 9) { start += 1 }
        while end > start && (bytes[end - 1] == 32 || bytes[end - 1] == 9) { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}

extension RetryPolicy {
    /// `decide` now (`Spool.wallClock()`) with the system's random numbers, for callers that wait
    /// in async code (the exporters): `SystemRandomness`, not the zero-sized
    /// `SystemRandomNumberGenerator`, because ThreadSanitizer crashes on an inout access to it.
    package func decideNow(_ outcome: AttemptOutcome, attempt: Int, firstSubmittedNanoseconds: Int64) -> RetryDecision {
        var random = SystemRandomness()
        return decide(outcome, attempt: attempt, firstSubmittedNanoseconds: firstSubmittedNanoseconds,
                      nowNanoseconds: Spool.wallClock(), using: &random)
    }
}
