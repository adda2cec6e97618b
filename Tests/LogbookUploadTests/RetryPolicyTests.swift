import LogbookTestKit
import XCTest
import LogbookUpload

/// The retry engine's decisions, with an injected clock and randomness: no test waits.
final class RetryPolicyTests: XCTestCase {
    /// 2026-11-23T12:00:00Z.
    let now: Int64 = 1_795_435_200 * 1_000_000_000

    /// Always the largest value: the backoff at its bound.
    struct Largest: RandomNumberGenerator { mutating func next() -> UInt64 { .max } }

    func testTheThreeHTTPDateFormsOfRFC9110() {
        let nowSeconds = now / 1_000_000_000
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT", nowSeconds: nowSeconds), 784_111_777)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", nowSeconds: nowSeconds), 784_111_777)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994", nowSeconds: nowSeconds), 784_111_777)
        XCTAssertEqual(HTTPDate.parse("Mon, 23 Nov 2026 12:00:10 GMT", nowSeconds: nowSeconds), nowSeconds + 10)
        XCTAssertEqual(HTTPDate.parse("Thu, 29 Feb 2024 00:00:00 GMT", nowSeconds: nowSeconds), 1_709_164_800)
        // A two-digit year more than 50 years ahead is the latest past year with those digits.
        XCTAssertEqual(HTTPDate.parse("Monday, 23-Nov-26 12:00:10 GMT", nowSeconds: nowSeconds), nowSeconds + 10)
        XCTAssertEqual(HTTPDate.parse("Tuesday, 01-Jan-70 00:00:00 GMT", nowSeconds: nowSeconds), 3_155_760_000)  // 2070
        XCTAssertEqual(HTTPDate.parse("Wednesday, 01-Jan-76 00:00:00 GMT", nowSeconds: nowSeconds), 3_345_062_400)  // 2076
        XCTAssertEqual(HTTPDate.parse("Saturday, 01-Jan-77 00:00:00 GMT", nowSeconds: nowSeconds), 220_924_800)  // 1977
        for garbage in [
            "", "soon", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT x",
            "Sunday, 06 Nov 1994 08:49:37 GMT", "Sun, 06-Nov-94 08:49:37 GMT", "Sun Nov 6 08:49:37 1994",
            "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 19944 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
        ] {
            XCTAssertNil(HTTPDate.parse(garbage, nowSeconds: nowSeconds), garbage)
        }
    }

    func testRetryAfterInBothFormsNeverRetriesEarlierThanItSays() {
        var random = Largest()
        let policy = RetryPolicy(baseDelay: .milliseconds(100), maxDelay: .seconds(1))
        let afterTwo = policy.decide(.status(503, retryAfter: "2"), attempt: 1, firstSubmittedNanoseconds: now,
                                     nowNanoseconds: now, using: &random)
        XCTAssertEqual(afterTwo, .retry(atNanoseconds: now + 2_000_000_000))
        let date = policy.decide(.status(429, retryAfter: "Mon, 23 Nov 2026 12:00:30 GMT"), attempt: 1,
                                 firstSubmittedNanoseconds: now, nowNanoseconds: now, using: &random)
        XCTAssertEqual(date, .retry(atNanoseconds: now + 30_000_000_000))
        let asctime = policy.decide(.status(503, retryAfter: "Mon Nov 23 12:00:05 2026"), attempt: 1,
                                    firstSubmittedNanoseconds: now, nowNanoseconds: now, using: &random)
        XCTAssertEqual(asctime, .retry(atNanoseconds: now + 5_000_000_000))
        // The backoff wins when it is longer (attempt 5: up to 1 s, the largest here).
        let short = policy.decide(.status(503, retryAfter: "0"), attempt: 5, firstSubmittedNanoseconds: now,
                                  nowNanoseconds: now, using: &random)
        XCTAssertEqual(short, .retry(atNanoseconds: now + 1_000_000_000))
    }

    func testAPastDateOrGarbageFallsBackToTheBackoffAndALongOneIsCutToTheMaximum() {
        let policy = RetryPolicy(baseDelay: .seconds(1), maxDelay: .seconds(60), maxRetryAfter: .seconds(600))
        for value in ["Sun, 06 Nov 1994 08:49:37 GMT", "later", "-5", "1.5", "", "Mon, 23 Nov 2026 12:00:00 GMT"] {
            var random = Largest()
            let decision = policy.decide(.status(503, retryAfter: value), attempt: 3, firstSubmittedNanoseconds: now,
                                         nowNanoseconds: now, using: &random)
            XCTAssertEqual(decision, .retry(atNanoseconds: now + 4_000_000_000), "'\(value)': the backoff of attempt 3")
        }
        for value in ["86400", "99999999999999999999999", "Tue, 24 Nov 2026 12:00:00 GMT"] {
            var random = Largest()
            let decision = policy.decide(.status(429, retryAfter: value), attempt: 1, firstSubmittedNanoseconds: now,
                                         nowNanoseconds: now, using: &random)
            XCTAssertEqual(decision, .retry(atNanoseconds: now + 600_000_000_000), "'\(value)': cut to the maximum")
        }
    }

    /// An outside test: an HTTP-date after 2262 (past Int64 nanoseconds) was taken for garbage and
    /// retried after the backoff (0.1 to 0.7 s), in IMF-fixdate and asctime form alike. It is far
    /// in the future: the wait is the maximum. A date before 1677 is in the past: the backoff.
    func testADateBeyondInt64NanosecondsIsFarInTheFuture() {
        let policy = RetryPolicy(baseDelay: .seconds(1), maxDelay: .seconds(60), maxRetryAfter: .seconds(3600))
        for value in ["Fri, 31 Dec 9999 23:59:59 GMT", "Fri Dec 31 23:59:59 9999", "Sun, 01 Jan 2263 00:00:00 GMT",
                      "Fri, 11 Apr 2262 23:47:17 GMT"] {
            XCTAssertEqual(RetryPolicy.retryAfterDelay(value, nowNanoseconds: now), .max, value)
            var random = Largest()
            let decision = policy.decide(.status(503, retryAfter: value), attempt: 1, firstSubmittedNanoseconds: now,
                                         nowNanoseconds: now, using: &random)
            XCTAssertEqual(decision, .retry(atNanoseconds: now + 3_600_000_000_000), "'\(value)': the hour's maximum")
        }
        for value in ["Mon, 01 Jan 0001 00:00:00 GMT", "Sat Jan  1 00:00:00 0000", "Wed, 01 Jan 1677 00:00:00 GMT"] {
            XCTAssertNil(RetryPolicy.retryAfterDelay(value, nowNanoseconds: now), value)
        }
    }

    func testBackoffIsFullJitterUnderADoublingBoundUpToTheCap() {
        let policy = RetryPolicy(baseDelay: .milliseconds(500), maxDelay: .seconds(30))
        var largest = Largest()
        let bounds = (1...12).map { policy.backoff(afterAttempt: $0, using: &largest) }
        XCTAssertEqual(bounds.prefix(7).map { $0 / 1_000_000 }, [500, 1000, 2000, 4000, 8000, 16000, 30000])
        XCTAssertEqual(Set(bounds.dropFirst(6)), [30_000_000_000])
        XCTAssertEqual(policy.backoff(afterAttempt: 10_000, using: &largest), 30_000_000_000, "no overflow")
        var random = SplitMix64(state: 42)
        let samples = (0..<2000).map { _ in policy.backoff(afterAttempt: 4, using: &random) }
        XCTAssertTrue(samples.allSatisfy { (0...4_000_000_000).contains($0) })
        let mean = Double(samples.reduce(0, +)) / Double(samples.count)
        XCTAssertEqual(mean, 2e9, accuracy: 2e8, "uniform over the whole range, not a fixed wait")
    }

    func testWhatIsRetriedAndWhatGivesUpAtOnce() {
        var random = SplitMix64(state: 1)
        func decide(_ outcome: AttemptOutcome, _ policy: RetryPolicy = .fileUpload) -> RetryDecision {
            policy.decide(outcome, attempt: 1, firstSubmittedNanoseconds: now, nowNanoseconds: now, using: &random)
        }
        for status in [200, 201, 202, 204, 299] { XCTAssertEqual(decide(.status(status, retryAfter: nil)), .delivered) }
        for status in [408, 425, 429, 500, 502, 503, 504] {
            guard case .retry = decide(.status(status, retryAfter: nil)) else { return XCTFail("\(status) is retried") }
        }
        for status in [301, 400, 401, 403, 404, 409, 413, 422, 501, 505] {
            XCTAssertEqual(decide(.status(status, retryAfter: "1")), .gaveUp(reason: "HTTP \(status)"))
        }
        guard case .retry = decide(.transportError("connection reset by peer")) else { return XCTFail() }
        guard case .retry = decide(.timedOut) else { return XCTFail() }
        // OTLP retries only what its specification allows.
        XCTAssertEqual(decide(.status(500, retryAfter: nil), .openTelemetry), .gaveUp(reason: "HTTP 500"))
        guard case .retry = decide(.status(503, retryAfter: nil), .openTelemetry) else { return XCTFail() }
        var noTransport = RetryPolicy.fileUpload
        noTransport.retriesTransportErrors = false
        XCTAssertEqual(decide(.transportError("refused"), noTransport), .gaveUp(reason: "refused"))
    }

    func testMaximumAttemptsAndExpiryAreEnforced() {
        var random = Largest()
        let policy = RetryPolicy(baseDelay: .seconds(1), maxDelay: .seconds(60), maxAttempts: 3, expiry: .seconds(3600))
        XCTAssertEqual(policy.decide(.status(503, retryAfter: nil), attempt: 3, firstSubmittedNanoseconds: now,
                                     nowNanoseconds: now, using: &random),
                       .gaveUp(reason: "3 attempts, the last: HTTP 503"))
        // A retry that would land after the expiry is not scheduled: the item expires now.
        let late = now + 3590 * 1_000_000_000
        XCTAssertEqual(policy.decide(.timedOut, attempt: 1, firstSubmittedNanoseconds: now, nowNanoseconds: late,
                                     using: &random), .retry(atNanoseconds: late + 1_000_000_000))
        let strict = RetryPolicy(baseDelay: .seconds(1), maxDelay: .seconds(60), maxAttempts: 10, expiry: .seconds(3600))
        XCTAssertEqual(strict.decide(.timedOut, attempt: 5, firstSubmittedNanoseconds: now, nowNanoseconds: late,
                                     using: &random), .expired, "16 s of backoff would end past the expiry")
        XCTAssertEqual(policy.decide(.status(503, retryAfter: "120"), attempt: 1, firstSubmittedNanoseconds: now,
                                     nowNanoseconds: late, using: &random), .expired)
        XCTAssertFalse(policy.isExpired(firstSubmittedNanoseconds: now, nowNanoseconds: now + 3600 * 1_000_000_000))
        XCTAssertTrue(policy.isExpired(firstSubmittedNanoseconds: now, nowNanoseconds: now + 3601 * 1_000_000_000))
        // A 2xx is a delivery even past the limits: the server has it.
        XCTAssertEqual(policy.decide(.status(200, retryAfter: nil), attempt: 99, firstSubmittedNanoseconds: now,
                                     nowNanoseconds: late * 2, using: &random), .delivered)
    }

    /// Finding 9 of the fourth outside test: progress is credited (the attempt does not count) only
    /// when it is worth an attempt: 1 MiB, or an eighth of what remained. A byte is not.
    func testProgressIsCreditedOnlyWhenItIsWorthAnAttempt() {
        let size = 3_000_000
        XCTAssertFalse(RetryPolicy.creditsProgress(from: 0, to: 1, of: size), "a byte")
        XCTAssertFalse(RetryPolicy.creditsProgress(from: 1000, to: 1000, of: size), "no move")
        XCTAssertFalse(RetryPolicy.creditsProgress(from: 2000, to: 1000, of: size), "backwards")
        XCTAssertTrue(RetryPolicy.creditsProgress(from: 0, to: size / 8, of: size), "an eighth")
        XCTAssertFalse(RetryPolicy.creditsProgress(from: 0, to: size / 8 - 1, of: size))
        XCTAssertTrue(RetryPolicy.creditsProgress(from: 0, to: 1 << 20, of: 1 << 30), "1 MiB of a GiB")
        XCTAssertFalse(RetryPolicy.creditsProgress(from: 0, to: (1 << 20) - 1, of: 1 << 30))
        XCTAssertTrue(RetryPolicy.creditsProgress(from: size - 8, to: size - 7, of: size), "a byte of the last eight")
    }

    /// However much each attempt moved an upload forward, no item gets more than 10 × maxAttempts
    /// attempts in all.
    func testAllAttemptsTogetherStopAtTenTimesTheMaximum() {
        var random = Largest()
        let policy = RetryPolicy(maxDelay: .seconds(1), maxAttempts: 3)
        XCTAssertEqual(policy.maxAttemptsInAll, 30)
        guard case .retry = policy.decide(.timedOut, attempt: 1, attemptsInAll: 29, firstSubmittedNanoseconds: now, nowNanoseconds: now,
                                          using: &random) else { return XCTFail("29 of 30 in all") }
        XCTAssertEqual(policy.decide(.timedOut, attempt: 2, attemptsInAll: 30, firstSubmittedNanoseconds: now, nowNanoseconds: now,
                                     using: &random),
                       .gaveUp(reason: "30 attempts in all (28 that moved the upload forward did not count), the last: timed out"))
        XCTAssertEqual(RetryPolicy(maxAttempts: .max).maxAttemptsInAll, .max, "no overflow")
    }

    /// Finding 8: every wait the policy asks is within `longestWait(afterAttempt:lastStatus:)`: the
    /// backoff's bound, or after an HTTP answer `maxRetryAfter` (whatever its Retry-After says);
    /// none before the first attempt. The uploader brings a stored next attempt back to it.
    func testEveryWaitIsWithinTheLongestWait() {
        let policy = RetryPolicy(baseDelay: .seconds(1), maxDelay: .seconds(300), maxRetryAfter: .seconds(3600), maxAttempts: 100)
        XCTAssertEqual(policy.longestWait(afterAttempt: 0, lastStatus: 0), 0)
        XCTAssertEqual(policy.longestWait(afterAttempt: 1, lastStatus: -1), 1_000_000_000)
        XCTAssertEqual(policy.longestWait(afterAttempt: 3, lastStatus: -1), 4_000_000_000)
        XCTAssertEqual(policy.longestWait(afterAttempt: 99, lastStatus: -1), 300_000_000_000)
        XCTAssertEqual(policy.longestWait(afterAttempt: 1, lastStatus: 503), 3_600_000_000_000)
        var random = Largest()
        for attempt in 1...40 {
            let outcomes: [(AttemptOutcome, Int)] = [
                (.timedOut, -1), (.transportError("reset"), -1), (.status(503, retryAfter: nil), 503),
                (.status(429, retryAfter: "99999999999"), 429), (.status(503, retryAfter: "Tue, 24 Nov 2026 12:00:00 GMT"), 503),
            ]
            for (outcome, status) in outcomes {
                guard case .retry(let at) = policy.decide(outcome, attempt: attempt, firstSubmittedNanoseconds: now, nowNanoseconds: now,
                                                          using: &random) else { continue }
                XCTAssertLessThanOrEqual(at - now, policy.longestWait(afterAttempt: attempt, lastStatus: status), "\(outcome), attempt \(attempt)")
            }
        }
    }
}
