import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
@testable import LogbookUpload

/// Waits and the wall clock: a next attempt stored farther ahead than the policy can ask (the clock
/// was set back since) never holds an item longer than the policy's bound. The clock is injected,
/// so no test waits for a verdict.
final class UploaderClockTests: XCTestCase, UploaderFailureTestCase {
    /// A clock the test moves.
    final class TestClock: Sendable {
        private let now: Locked<Int64>
        init(_ start: Int64) { now = Locked(start) }
        var value: Int64 { now.withLock { $0 } }
        func set(_ value: Int64) { now.withLock { $0 = value } }
    }

    static let day: Int64 = 86_400 * 1_000_000_000

    /// Finding 8: an item spooled while the wall clock was a day ahead, then set right, was next
    /// tried 86,397 s later. An item never tried is due at once: with the clock stopped, it is
    /// delivered, and its first submission is not in the future (its expiry counts from now).
    func testAnItemSpooledWhileTheClockWasADayAheadIsTriedAtOnce() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let now = Spool.wallClock()
        let spool = dir + "/spool"
        let item: SpooledItem
        do {
            let ahead = try Uploader(.init(spool: spool, isAllowed: false, clock: { now + Self.day }, makeRequest: request(server.url("/ok"))))
            item = try ahead.submit(data: Array("spooled a day ahead".utf8))
        }
        let uploader = try Uploader(.init(spool: spool, clock: { now }, makeRequest: request(server.url("/ok"))))
        uploader.start()
        let seen = await outcomes(uploader, count: 1)
        await uploader.stop()
        XCTAssertEqual(seen, [.delivered(id: item.id, attempts: 1)])
    }

    /// Finding 8: a next attempt stored a day ahead (the clock set back after an attempt, or a
    /// crafted state) is brought back to the longest wait the policy can ask after that attempt:
    /// here the backoff's bound after 3 attempts that got no answer, min(5 s, 1 s × 2²) = 4 s.
    /// Once the clock reaches that, the item goes.
    func testANextAttemptFartherAheadThanThePolicyCanAskIsBroughtBackToItsBound() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let start = Spool.wallClock()
        let clock = TestClock(start)
        let spool = dir + "/spool"
        let ids = try spoolItems(["tried three times"], in: spool, server: server)
        do {
            let raw = try Spool(path: spool)
            var item = try XCTUnwrap(try raw.contents().items.first)
            item.attempts = 3
            item.lastStatus = -1
            item.lastReason = "the connection was lost"
            item.nextAttemptNanoseconds = start + Self.day
            try raw.update(item)
        }
        let policy = RetryPolicy(baseDelay: .seconds(1), maxDelay: .seconds(5), maxRetryAfter: .seconds(3600))
        let uploader = try Uploader(.init(spool: spool, policy: policy, clock: { clock.value }, makeRequest: request(server.url("/ok"))))
        uploader.start()
        let broughtBack = await eventually { uploader.pending.first?.nextAttemptNanoseconds == start + 4_000_000_000 }
        XCTAssertTrue(broughtBack, "next attempt: \(String(describing: uploader.pending.first?.nextAttemptNanoseconds)), now \(start)")
        XCTAssertEqual(server.requests().count, 0, "not before its time")
        clock.set(start + 4_000_000_000)
        let seen = await outcomes(uploader, count: 1)
        await uploader.stop()
        XCTAssertEqual(seen, [.delivered(id: ids[0], attempts: 4)])
    }

    /// The same bound after an HTTP answer: a `Retry-After` may have asked for up to the policy's
    /// `maxRetryAfter`, so a stored wait is brought back to that (10 s here), not to the backoff's.
    func testAfterAnHTTPAnswerTheBoundIsTheLongestRetryAfter() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let start = Spool.wallClock()
        let spool = dir + "/spool"
        _ = try spoolItems(["answered 503"], in: spool, server: server)
        do {
            let raw = try Spool(path: spool)
            var item = try XCTUnwrap(try raw.contents().items.first)
            item.attempts = 1
            item.lastStatus = 503
            item.nextAttemptNanoseconds = start + Self.day
            try raw.update(item)
        }
        let policy = RetryPolicy(baseDelay: .seconds(1), maxDelay: .seconds(5), maxRetryAfter: .seconds(10))
        let uploader = try Uploader(.init(spool: spool, policy: policy, clock: { start }, makeRequest: request(server.url("/ok"))))
        uploader.start()
        let broughtBack = await eventually { uploader.pending.first?.nextAttemptNanoseconds == start + 10_000_000_000 }
        await uploader.stop()
        XCTAssertTrue(broughtBack, "next attempt: \(String(describing: uploader.pending.first?.nextAttemptNanoseconds)), now \(start)")
    }

    /// Finding 8 through `logbook upload`: with `--max-delay 1`, an item spooled while the clock
    /// was a day ahead printed nothing and sent nothing. Now it is delivered at once.
    func testTheUploadCommandSendsAnItemSpooledWhileTheClockWasAhead() async throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let spool = dir + "/spool"
        let now = Spool.wallClock()
        do {
            let ahead = try Uploader(.init(spool: spool, isAllowed: false, clock: { now + Self.day }, makeRequest: request(server.url("/ok"))))
            try ahead.submit(data: Array("spooled a day ahead".utf8))
        }
        let output = Pipe()
        let process = try launch(logbook, ["upload", "--spool", spool, "--max-delay", "1", "--to", server.url("/ok/{id}").absoluteString],
                                 output: output)
        let ended = waitUntil { !process.isRunning }  // a failsafe: it used to wait a day
        if !ended { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(ended, "still waiting: \(text)")
        XCTAssertEqual(process.terminationStatus, 0, text)
        XCTAssertTrue(text.contains("1 delivered"), text)
    }
}
