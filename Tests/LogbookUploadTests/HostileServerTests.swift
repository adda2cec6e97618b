import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
@testable import LogbookUpload

/// The uploader against servers that answer to hurt it (Tests/Servers/upload_server.py on
/// 127.0.0.1): upload URLs that are no URI, an upload URL kept from another destination, a server
/// that keeps one byte per attempt, answers that trickle forever. No answer may crash the
/// uploader, send a credential or a body to another origin, or hold an item past a stated bound.
final class HostileServerTests: XCTestCase, UploaderFailureTestCase {
    /// The raw `Location` values of finding 1 of the fourth outside test: each crashed the uploader
    /// (a Foundation fatal error) when a 104 named it, at every relaunch.
    static let locationsThatAreNoURI: [[UInt8]] = [
        "/upload/a b", "/upload/a|b", "/upload/\"q\"", "/upload/<x>", "/upload/a^b", "/upload/a`b", "/upload/{x}",
        "/upload/%zz", "/upload/50%", "/upload/%4", "/upload/x#a#b", "/upload/x?q=caf\u{E9}",
        "http://127.0.0.1:1/a b", "/upload/x\tz",
    ].map { Array($0.utf8) } + [Array("/upload/x?q=".utf8) + [0xFF, 0xFE], Array("/upload/".utf8) + [0x80]]

    /// The path of `upload_server.py` that sends a 104 with `location` as its raw bytes.
    static func locationPath(_ location: [UInt8]) -> String {
        "/resumable-location/" + location.map { String(format: "%%%02X", $0) }.joined()
    }

    /// Finding 1: a 104 whose `Location` is no URI reference (a space, `|`, a quote, `<>`, `^`, a
    /// backquote, `{}`, a bad or lone `%`, a second `#`, a control or non-ASCII byte) crashed the
    /// uploader. Now it is ignored (not kept) and counted, and the upload goes on to its 2xx.
    func testA104WhoseLocationIsNoURIIsIgnoredAndTheUploadGoesOn() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let locations = Self.locationsThatAreNoURI
        let base = "http://127.0.0.1:\(server.port)"
        let uploader = try Uploader(.init(spool: dir + "/spool", maxConcurrentUploads: 1) { item in
            let index = Int(item.id.dropFirst("location-".count))!
            return DeliveryRequest(method: "PUT", url: base + Self.locationPath(locations[index]))
        })
        for index in locations.indices { try uploader.submit(data: Array("body \(index)".utf8), id: "location-\(index)") }
        uploader.start()
        let seen = await outcomes(uploader, count: locations.count)
        await uploader.stop()
        XCTAssertEqual(Set(seen), Set(locations.indices.map { Uploader.Outcome.delivered(id: "location-\($0)", attempts: 1) }))
        XCTAssertEqual(uploader.statistics.ignoredUploadURLs, locations.count, "each ignored upload URL is counted")
        XCTAssertEqual(server.requests().filter { $0["path"] as? String == "/upload" || ($0["answer"] as? String) == "head" }.count, 0)
    }

    /// The same through `logbook upload`: it exited 132 (a Foundation fatal error) at every run, and
    /// the spool never drained. Now it delivers, says the upload URL was ignored, and exits 0.
    func testTheUploadCommandSurvivesA104WhoseLocationIsNoURI() throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        try Data("report".utf8).write(to: URL(fileURLWithPath: dir + "/report.txt"))
        let to = "http://127.0.0.1:\(server.port)" + Self.locationPath(Array("/upload/a b|{c}".utf8))
        let run = try runProgram(logbook, ["upload", "--spool", dir + "/spool", "--to", to, dir + "/report.txt"])
        XCTAssertEqual(run.status, 0, run.output)
        XCTAssertTrue(run.output.contains("delivered report.txt (1 attempt)"), run.output)
        XCTAssertTrue(run.output.contains("ignored 1 upload URL"), run.output)
    }

    /// The resolution of a 104's `Location` alone: what is kept, and what is ignored (each of the
    /// crashing values among them, and other origins).
    func testOnlyAnUploadURLThatIsAURIOnTheRequestsOriginIsKept() {
        let request = "http://127.0.0.1:8080/files/x?token=1"
        func resolve(_ location: [UInt8]) -> ResumableUpload.Location {
            let text = String(decoding: location, as: UTF8.self)
            return ResumableUpload.location(in: [("Upload-Draft-Interop-Version", "6"), ("Location", text)], sentTo: request)
        }
        for location in Self.locationsThatAreNoURI {
            guard case .ignored = resolve(location) else {
                return XCTFail("kept: \(String(decoding: location, as: UTF8.self))")
            }
        }
        let kept: [(String, String)] = [
            ("/resumable_upload/abc", "http://127.0.0.1:8080/resumable_upload/abc"),
            ("/r/1?x=%20y&z=(1)", "http://127.0.0.1:8080/r/1?x=%20y&z=(1)"),
            ("/r/1#fragment", "http://127.0.0.1:8080/r/1"),
            ("http://127.0.0.1:8080/r/2", "http://127.0.0.1:8080/r/2"),
            ("HTTP://127.0.0.1:8080/r/3", "HTTP://127.0.0.1:8080/r/3"),
            ("//127.0.0.1:8080/r/4", "http://127.0.0.1:8080/r/4"),
            ("r/5", "http://127.0.0.1:8080/files/r/5"),
            ("?upload=6", "http://127.0.0.1:8080/files/x?upload=6"),
        ]
        for (location, url) in kept {
            XCTAssertEqual(resolve(Array(location.utf8)), .kept(url), location)
        }
        for foreign in ["http://evil.example/u/1", "https://127.0.0.1:8080/r/1", "//evil.example/r/1", "http://127.0.0.1:8081/r/1",
                        "http://user@127.0.0.1:8080/r/1", "ftp://127.0.0.1:8080/r/1", "http://127.0.0.1:8080@evil.example/r/1"] {
            guard case .ignored = resolve(Array(foreign.utf8)) else { return XCTFail("kept: \(foreign)") }
        }
        XCTAssertEqual(ResumableUpload.location(in: [("Upload-Draft-Interop-Version", "5"), ("Location", "/r/1")], sentTo: request),
                       .none, "another interop version: no offer")
        XCTAssertEqual(ResumableUpload.location(in: [("Upload-Draft-Interop-Version", "6")], sentTo: request), .none)
    }

    /// Finding 2: a resumption URL kept from a run to server A was used by a later run whose
    /// destination is server B: HEAD and PATCH went to A with B's token, B got nothing, and the file
    /// was reported delivered. Now an upload URL is used only by the request it was learned from:
    /// B gets the whole body, and A nothing more.
    func testAnUploadURLKeptForOneDestinationIsNeverUsedForAnother() async throws {
        let dir = makeTemporaryDirectory(self)
        for name in ["a", "b"] { try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true) }
        let serverA = try UploadServer(directory: dir + "/a")
        let serverB = try UploadServer(directory: dir + "/b", keepsBodies: true)
        let spool = dir + "/spool"
        let body = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let toA = serverA.url("/resumable-half/report").absoluteString, toB = serverB.url("/ok/report").absoluteString
        let item: SpooledItem
        do {  // A keeps half of it and answers 503 with Retry-After: 3600: the item waits, its upload URL kept.
            let first = try Uploader(.init(spool: spool) { _ in
                DeliveryRequest(method: "PUT", url: toA, headers: [("Authorization", "Bearer token-of-A")])
            })
            item = try first.submit(data: body)
            first.start()
            let attempted = await eventually { first.statistics.attempts == 1 }
            XCTAssertTrue(attempted)
            await first.stop()
            XCTAssertNotNil(first.pending.first?.resumptionURL, "A's 104 named an upload URL")
        }
        let later = Spool.wallClock() + 7200 * 1_000_000_000  // past A's Retry-After
        let second = try Uploader(.init(spool: spool, clock: { later }) { _ in
            DeliveryRequest(method: "PUT", url: toB, headers: [("Authorization", "Bearer token-of-B")])
        })
        second.start()
        let seen = await outcomes(second, count: 1)
        await second.stop()
        XCTAssertEqual(seen, [.delivered(id: item.id, attempts: 2)])
        let atA = serverA.requests()
        XCTAssertEqual(atA.count, 1, "A got its first request only: \(atA)")
        XCTAssertFalse(atA.contains { ($0["authorization"] as? String) == "Bearer token-of-B" }, "B's token went to A")
        let atB = serverB.requests()
        XCTAssertEqual(atB.map { $0["answer"] as? Int }, [201], "\(atB)")
        XCTAssertEqual(atB.first?["authorization"] as? String, "Bearer token-of-B")
        XCTAssertEqual(try Array(Data(contentsOf: URL(fileURLWithPath: serverB.bodies + "/" + item.id))), body)
    }

    /// Finding 2, a crafted state: an upload URL on another origin (or one not learned from this
    /// request) put into an item's state got a HEAD, with the request's headers. Now it is
    /// forgotten, and the item goes whole to its destination.
    func testACraftedUploadURLGetsNoRequest() async throws {
        let dir = makeTemporaryDirectory(self)
        try FileManager.default.createDirectory(atPath: dir + "/other", withIntermediateDirectories: true)
        let other = try UploadServer(directory: dir + "/other")
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let spool = dir + "/spool"
        let ids = try spoolItems(["foreign", "same origin, not this request's"], in: spool, server: server)
        let base = "http://127.0.0.1:\(server.port)/ok/"
        do {
            let raw = try Spool(path: spool)
            for item in try raw.contents().items {
                var crafted = item
                if item.id == ids[0] {  // on another origin, said to be learned from this very request
                    crafted.resumptionURL = other.url("/upload/1").absoluteString
                    crafted.resumptionRequestURL = base + item.id
                } else {  // on this origin, learned from another request URL
                    crafted.resumptionURL = server.url("/upload/77").absoluteString
                    crafted.resumptionRequestURL = base + "another"
                }
                try raw.update(crafted)
            }
        }
        let uploader = try Uploader(.init(spool: spool) { item in
            DeliveryRequest(method: "PUT", url: base + item.id, headers: [("Authorization", "Bearer secret")])
        })
        uploader.start()
        let seen = await outcomes(uploader, count: 2)
        await uploader.stop()
        XCTAssertEqual(Set(seen), Set(ids.map { Uploader.Outcome.delivered(id: $0, attempts: 1) }))
        XCTAssertEqual(other.requests().count, 0, "a request went to another origin: \(other.requests())")
        XCTAssertEqual(server.requests().compactMap { $0["path"] as? String }.sorted(), ids.map { "/ok/" + $0 }.sorted(),
                       "only the items' own requests")
    }

    /// Finding 9: a server that keeps one byte per attempt and then resets moved the upload forward
    /// each time, so no attempt counted: `--max-attempts 4` made 55 attempts in 30 s, and about 2
    /// million for 3 MB. Now progress counts only when it is worth an attempt (1 MiB, or an eighth
    /// of what remained): the fourth attempt gives up.
    func testAServerThatKeepsOneBytePerAttemptExhaustsTheAttempts() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let url = server.url("/resumable-trickle/x").absoluteString
        let uploader = try Uploader(.init(spool: dir + "/spool", policy: RetryPolicy(maxDelay: .zero, maxAttempts: 4)) { _ in
            DeliveryRequest(method: "PUT", url: url)
        })
        let item = try uploader.submit(data: Array(repeating: 5, count: 4096))
        uploader.start()
        let seen = await outcomes(uploader, count: 1)
        await uploader.stop()
        guard case .gaveUp(item.id, let reason)? = seen.first else { return XCTFail("\(seen)") }
        XCTAssertTrue(reason.hasPrefix("4 attempts"), reason)
        let answers = server.requests().map { "\($0["answer"] ?? "")" }
        XCTAssertEqual(answers.filter { $0 == "reset" }.count, 4, "\(answers)")
    }

    /// Finding 9, the other side: a server whose every attempt keeps an eighth of what remains
    /// moves the upload forward by enough to be credited each time, but never finishes it soon
    /// (about 90 attempts for 64 KiB): at most 10 × the policy's attempts are made in all.
    func testAttemptsThatMoveTheUploadForwardStopAtTenTimesTheMaximum() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let url = server.url("/resumable-eighth/x").absoluteString
        let uploader = try Uploader(.init(spool: dir + "/spool", policy: RetryPolicy(maxDelay: .zero, maxAttempts: 2)) { _ in
            DeliveryRequest(method: "PUT", url: url)
        })
        let item = try uploader.submit(data: Array(repeating: 6, count: 64 << 10))
        uploader.start()
        let seen = await outcomes(uploader, count: 1)
        await uploader.stop()
        guard case .gaveUp(item.id, let reason)? = seen.first else { return XCTFail("\(seen)") }
        XCTAssertTrue(reason.hasPrefix("20 attempts in all"), reason)
        XCTAssertEqual(server.requests().filter { ($0["answer"] as? String) == "reset" }.count, 20)
    }

    /// Finding 10: a 201 followed by a body of one byte every half second held an attempt with a
    /// 10 s timeout past 150 s (each byte was progress). Now, once the request is sent, the whole
    /// answer must come within the timeout, and an answer's body is read only up to a bound: an
    /// answer trickling forever (its body, its head, or 104s one after another) ends the attempt
    /// as timed out.
    func testAnAnswerThatTricklesForeverEndsAtTheTimeout() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        for what in ["body", "head", "interim"] {
            let uploader = try Uploader(.init(spool: dir + "/spool-" + what, policy: RetryPolicy(maxAttempts: 1), timeout: .seconds(1),
                                              makeRequest: request(server.url("/trickle/" + what))))
            let item = try uploader.submit(data: Array("trickle \(what)".utf8))
            uploader.start()
            let seen = await outcomes(uploader, count: 1)
            await uploader.stop()
            XCTAssertEqual(seen, [.gaveUp(id: item.id, reason: "1 attempts, the last: timed out")], what)
        }
    }
    /// An outside test: an answer whose head held a header over 100 KB (a 503, a 201, or a 104)
    /// gave up at once, "Out of memory", as "0 attempts", and moved the item to quarantine/ (the
    /// 201: a delivered item reported failed). libcurl refuses such a line, and the failure was
    /// taken for the content's. An answer head too large to read (over 100 KiB: one line, or many)
    /// is now a failed attempt of the exchange: counted, retried by the policy, said as such, never
    /// quarantined. A 104 too large makes the item's next attempts plain uploads, which deliver.
    func testAnAnswerHeadTooLargeIsAFailedAttemptRetriedNeverQuarantined() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let base = "http://127.0.0.1:\(server.port)/bighead/"
        let policy = RetryPolicy(maxDelay: .zero, maxAttempts: 2)
        let uploader = try Uploader(.init(spool: dir + "/spool", policy: policy, maxConcurrentUploads: 1) { item in
            DeliveryRequest(method: "PUT", url: base + item.id.replacingOccurrences(of: "-", with: "/"))
        })
        for id in ["503-line", "201-line", "503-lines", "104-line", "104-lines"] { try uploader.submit(data: Array(id.utf8), id: id) }
        uploader.start()
        let seen = await outcomes(uploader, count: 5)
        await uploader.stop()
        func tooLarge(_ status: Int) -> String {
            "2 attempts, the last: the server's answer (HTTP \(status)) has a head larger than 100 KiB: not read"
        }
        XCTAssertEqual(Set(seen), [.gaveUp(id: "503-line", reason: tooLarge(503)), .gaveUp(id: "201-line", reason: tooLarge(201)),
                                   .gaveUp(id: "503-lines", reason: tooLarge(503)),
                                   .delivered(id: "104-line", attempts: 2), .delivered(id: "104-lines", attempts: 2)])
        let statistics = uploader.statistics
        XCTAssertEqual(statistics.attempts, 10)
        XCTAssertEqual(statistics.quarantined, 0)
        XCTAssertEqual(statistics.ignoredUploadURLs, 2, "each 104 that could not be read")
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: dir + "/spool/quarantine")) ?? [], [])
        // The 104 goes only to a request that offers a resumable upload: the second attempts were
        // plain. (The first attempts' own lines may be missing: their connection ended mid-body.)
        let second = server.requests().filter { ($0["path"] as? String)?.hasPrefix("/bighead/104") == true && $0["attempt"] as? String == "2" }
        XCTAssertEqual(second.map { $0["answer"] as? Int }, [201, 201])
    }
}
