import Foundation
import LogbookTestKit
import XCTest
import LogbookUpload

final class UploaderConcurrencyTests: XCTestCase {
    /// The request timeout is far above what any attempt here takes, however loaded the machine:
    /// an attempt that timed out would change the attempts and answers the tests expect.
    func makeUploader(_ dir: String, server: UploadServer, path: String, policy: RetryPolicy = .fileUpload,
                      timeout: Duration = .seconds(60), clock: @escaping @Sendable () -> Int64 = Spool.wallClock) throws -> Uploader {
        let url = server.url(path)
        return try Uploader(.init(spool: dir + "/spool", policy: policy, timeout: timeout, clock: clock) { _ in
            DeliveryRequest(method: "PUT", url: (url).absoluteString)
        })
    }

    /// The next outcome. The deadline is a failsafe against a hang: the test fails when it passes.
    func next(_ uploader: Uploader, within seconds: Double = 120) async throws -> Uploader.Outcome {
        try await withThrowingTaskGroup(of: Uploader.Outcome?.self) { group in
            group.addTask {
                for await outcome in uploader.outcomes { return outcome }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            guard let first else { throw TestFailure("no outcome within \(seconds) s") }
            return first
        }
    }

    /// 503 with `Retry-After: 1` twice, then 201: delivered on the third attempt, never earlier
    /// than the server said, with the same key every time and the attempt counted.
    func testRetriesAfterWhatTheServerSaysThenDelivers() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let uploader = try makeUploader(dir, server: server, path: "/fail/2/503/1",
                                        policy: RetryPolicy(baseDelay: .milliseconds(10), maxDelay: .milliseconds(50)))
        let item = try uploader.submit(data: Array("payload".utf8))
        let started = Date()
        uploader.start()
        let outcome = try await next(uploader)
        await uploader.stop()
        XCTAssertEqual(outcome, .delivered(id: item.id, attempts: 3))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 2.0, "two Retry-After: 1 waits")
        let requests = server.requests()
        XCTAssertEqual(requests.map { $0["answer"] as? Int }, [503, 503, 201])
        XCTAssertEqual(Set(requests.compactMap { $0["key"] as? String }), ["\"\(item.id)\""])
        XCTAssertEqual(requests.compactMap { $0["attempt"] as? String }, ["1", "2", "3"])
        XCTAssertEqual(requests.compactMap { $0["bytes"] as? Int }, [7, 7, 7])
        XCTAssertEqual(uploader.pending, [])
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/spool/\(item.id).data"), "deleted after the 2xx")
    }

    /// A 400 gives up at once, with the status as the reason.
    func testAClientErrorGivesUpAtOnce() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let uploader = try makeUploader(dir, server: server, path: "/status/400")
        let item = try uploader.submit(data: [1, 2, 3])
        uploader.start()
        let outcome = try await next(uploader)
        await uploader.stop()
        XCTAssertEqual(outcome, .gaveUp(id: item.id, reason: "HTTP 400"))
        XCTAssertEqual(server.requests().count, 1)
    }

    /// A connection reset in the middle of the body is a transport error, retried; the process
    /// survives it (FoundationNetworking traps on this with a file body).
    func testAResetMidBodyIsRetriedAndKeptAcrossARelaunch() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let big = [UInt8](repeating: 9, count: 4 << 20)
        var id = ""
        do {
            // The uploader's clock stands still: the retry, due a random 0 to 30 s later by that
            // clock, never comes (by the wall clock, a short one could end a second attempt
            // before a slow test came to `stop()`).
            let now = Spool.wallClock()
            let uploader = try makeUploader(dir, server: server, path: "/reset",
                                            policy: RetryPolicy(baseDelay: .seconds(30), maxDelay: .seconds(30)),
                                            clock: { now })
            id = try uploader.submit(data: big).id
            uploader.start()
            // Stopped once the reset attempt was settled (counted), not after a time.
            let settled = await eventually { uploader.pending.first?.attempts == 1 }
            XCTAssertTrue(settled, "the reset attempt was never settled")
            await uploader.stop()
            XCTAssertEqual(uploader.pending.map(\.attempts), [1])
            XCTAssertEqual(uploader.pending.first?.lastStatus, -1)
        }
        // Relaunch against a server that accepts: the item resumes with its attempt count.
        let okURL = server.url("/ok")
        let relaunched = try Uploader(.init(spool: dir + "/spool", clock: { Int64.max / 4 }) { _ in
            DeliveryRequest(method: "PUT", url: (okURL).absoluteString)
        })
        XCTAssertEqual(relaunched.pending.map(\.id), [id])
        relaunched.start()
        let outcome = try await next(relaunched)
        await relaunched.stop()
        // The injected clock is far past the expiry: an item found that late is expired, not sent.
        XCTAssertEqual(outcome, .expired(id: id))
    }
}
