import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
@testable import LogbookUpload

/// The uploader against a real server on 127.0.0.1 that misbehaves: HTTP-date Retry-After,
/// stalls, a full disk under the spool, damaged state, quotas, consent, archive files whose names
/// retention deletes before they are uploaded, and kills at random moments.
/// Those of its tests that CI also runs under ThreadSanitizer are in `UploaderFailureConcurrencyTests`.
final class UploaderFailureTests: XCTestCase, UploaderFailureTestCase {
    /// A bundle at `path` with `files` complete archive files of one record each.
    func writeBundle(_ path: String, rollingFiles files: Int, compressionLevel: Int? = 1) throws {
        let bundle = try LogBundle(path: path, capacity: 4 * 65536, chunkSize: 65536,
                                   archive: ArchiveOptions(compressionLevel: compressionLevel))
        for index in 0..<files {
            try bundle.logger("x").info("file \(index)")
            try bundle.rollArchive()
        }
        try bundle.close()
    }

    /// 429 with an IMF-fixdate two seconds ahead: not retried before that date.
    func testA429WithAnHTTPDateIsNotRetriedBeforeThatDate() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let date = Date().addingTimeInterval(3)
        let retryAfter = formatter.string(from: date).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let uploader = try Uploader(.init(spool: dir + "/spool", policy: RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(1)),
                                          makeRequest: request(server.url("/fail/1/429/" + retryAfter))))
        let item = try uploader.submit(data: Array(repeating: 7, count: 1000))
        uploader.start()
        let seen = await outcomes(uploader, count: 1)
        await uploader.stop()
        XCTAssertEqual(seen, [.delivered(id: item.id, attempts: 2)])
        let delivered = Date()
        // The date has whole seconds: the retry may come at most a second before `date`.
        XCTAssertGreaterThanOrEqual(delivered.timeIntervalSince(date), -1.0, "retried before the server's date")
        XCTAssertEqual(server.requests().map { $0["answer"] as? Int }, [429, 201])
    }

    /// A server that never answers: the attempt times out, is counted, and the item stays.
    ///
    /// The uploader's clock stands still: the retry, due a random 0 to 60 s later by that clock,
    /// never comes while the test looks. (By the wall clock, a retry drawn short enough could
    /// begin, and time out, a second attempt before a slow test came to `stop()`.)
    func testAStallPastTheTimeoutIsRetriedAndTheItemKept() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let now = Spool.wallClock()
        let uploader = try Uploader(.init(spool: dir + "/spool", policy: RetryPolicy(baseDelay: .seconds(60)),
                                          timeout: .seconds(1), clock: { now }, makeRequest: request(server.url("/stall"))))
        let item = try uploader.submit(data: [1, 2, 3])
        uploader.start()
        let attempted = await eventually { uploader.statistics.attempts > 0 }
        XCTAssertTrue(attempted, "no attempt ended")
        await uploader.stop()
        XCTAssertEqual(uploader.statistics.attempts, 1)
        XCTAssertEqual(uploader.statistics.failedAttempts, 1)
        XCTAssertEqual(uploader.pending.map(\.id), [item.id])
        XCTAssertEqual(uploader.pending.first?.lastReason, "timed out")
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/spool/\(item.id).data"))
    }

    /// Two 500s then 201: file uploads retry 500; OpenTelemetry's policy does not.
    func testA500IsRetriedForFilesButNotUnderTheOpenTelemetryPolicy() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let fast = RetryPolicy(baseDelay: .milliseconds(5), maxDelay: .milliseconds(5))
        var otlp = RetryPolicy.openTelemetry
        otlp.baseDelay = .milliseconds(5)
        for (name, policy, expected) in [("files", fast, Uploader.Outcome.delivered(id: "files", attempts: 3)),
                                         ("otlp", otlp, .gaveUp(id: "otlp", reason: "HTTP 500"))] {
            let uploader = try Uploader(.init(spool: dir + "/spool-" + name, policy: policy,
                                              makeRequest: request(server.url("/fail/2/500/" + name))))
            try uploader.submit(data: Array(name.utf8), id: name)
            uploader.start()
            let seen = await outcomes(uploader, count: 1)
            await uploader.stop()
            XCTAssertEqual(seen, [expected], name)
        }
    }

    /// A reset on a connection that an earlier upload used: libcurl would retry by itself with no
    /// body (it cannot rewind FoundationNetworking's); every attempt has a fresh connection, so the
    /// server never sees a request cut short by such a retry, and each item arrives whole.
    func testAResetOnAReusedConnectionNeverSendsAnEmptyRetry() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let uploader = try Uploader(.init(spool: dir + "/spool", policy: RetryPolicy(baseDelay: .milliseconds(5), maxDelay: .milliseconds(5)),
                                          maxConcurrentUploads: 1, timeout: .seconds(60), makeRequest: request(server.url("/reset-once"))))
        var items: [SpooledItem] = []
        for index in 0..<8 { items.append(try uploader.submit(data: Array("message number \(index) of eight".utf8))) }
        uploader.start()
        let seen = await outcomes(uploader, count: 8)
        await uploader.stop()
        XCTAssertEqual(Set(seen), Set(items.map { Uploader.Outcome.delivered(id: $0.id, attempts: 2) }))
        let answers = server.requests().map { "\($0["answer"] ?? "")" }
        XCTAssertFalse(answers.contains("short"), "a request arrived without its body: \(answers)")
        for item in items {
            XCTAssertEqual(try? Array(Data(contentsOf: URL(fileURLWithPath: server.bodies + "/" + item.id))).count,
                           item.byteCount)
        }
    }

    /// A redirect is not followed (a 301, 302 or 303 would resend as a GET without the body, and
    /// its 200 would pass for a delivery): it gives up with the status as the reason.
    func testRedirectsAreNotFollowed() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        for status in [301, 302, 303, 307, 308] {
            let uploader = try Uploader(.init(spool: dir + "/spool-\(status)", makeRequest: request(server.url("/redirect/\(status)"))))
            let item = try uploader.submit(data: Array("body \(status)".utf8))
            uploader.start()
            let seen = await outcomes(uploader, count: 1)
            await uploader.stop()
            XCTAssertEqual(seen, [.gaveUp(id: item.id, reason: "HTTP \(status)")])
        }
        XCTAssertEqual(server.requests().map { $0["path"] as? String }.filter { $0 == "/ok/redirected" }, [], "followed a redirect")
    }

    /// A file changed in place after `submit(file:)` returned: the spool's copy is what arrives.
    /// Linked (`linking: true`, for files never changed in place), a change of size is given up,
    /// never sent under the old content's key.
    func testAFileChangedAfterSubmissionIsNotSentAsTheOldContent() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let uploader = try Uploader(.init(spool: dir + "/spool", isAllowed: false, makeRequest: request(server.url("/ok"))))
        let copied = dir + "/report.json", linked = dir + "/linked.bin"
        let original = [UInt8](repeating: 65, count: 2200)
        try Data(original).write(to: URL(fileURLWithPath: copied))
        try Data(original + [1]).write(to: URL(fileURLWithPath: linked))
        let copy = try uploader.submit(file: copied)
        let link = try uploader.submit(file: linked, linking: true)
        for path in [copied, linked] {  // rewritten in place (O_TRUNC), as editors and loggers do
            let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: Data("new content".utf8))
            try handle.close()
        }
        uploader.isAllowed = true
        uploader.start()
        let seen = await outcomes(uploader, count: 2)
        await uploader.stop()
        XCTAssertEqual(Set(seen), [.delivered(id: copy.id, attempts: 1),
                                   .gaveUp(id: link.id, reason: "the file changed after it was submitted (2201 bytes, now 11)")])
        XCTAssertEqual(try Array(Data(contentsOf: URL(fileURLWithPath: server.bodies + "/" + copy.id))), original)
        XCTAssertFalse(FileManager.default.fileExists(atPath: server.bodies + "/" + link.id), "sent under the old content's key")
    }

    /// `logbook upload` with items the spool quarantines as it opens (a symlink and a FIFO planted
    /// where their content belongs): each is reported before the summary, counted as failed, and
    /// the run exits 1 (an outside run saw exit 0, and the line after the summary or not at all).
    func testTheCLIReportsItemsQuarantinedAsTheSpoolOpens() throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        for _ in 0..<3 {
            let dir = makeTemporaryDirectory(self)
            let server = try UploadServer(directory: dir)
            let spool = dir + "/spool"
            let ids = try spoolItems(["a", "b", "c"], in: spool, server: server)
            try FileManager.default.removeItem(atPath: spool + "/\(ids[0]).data")
            try FileManager.default.createSymbolicLink(atPath: spool + "/\(ids[0]).data", withDestinationPath: "/etc/hostname")
            try FileManager.default.removeItem(atPath: spool + "/\(ids[1]).data")
            XCTAssertEqual(mkfifo(spool + "/\(ids[1]).data", 0o600), 0)
            let (status, output) = try runProgram(logbook, ["upload", "--spool", spool, "--to", server.url("/ok/{id}").absoluteString])
            XCTAssertEqual(status, 1, output)
            let lines = output.split(separator: "\n").map(String.init)
            let summary = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("1 delivered") }, output)
            for id in ids[0...1] {
                let line = try XCTUnwrap(lines.firstIndex { $0.contains("quarantined \(id)") }, output)
                XCTAssertLessThan(line, summary, output)
            }
            XCTAssertTrue(lines[summary].contains("2 failed"), output)
        }
    }

    /// An outside test: an item whose content was deleted from the spool was dropped in silence by
    /// the next run, its state with it, and `logbook upload` exited 0. Now it is given up with the
    /// reason, its state kept in quarantine/, whether it went before the spool was opened or while
    /// the uploader ran; the other items go on.
    func testAnItemWhoseContentIsGoneIsReportedNotDroppedInSilence() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let spool = dir + "/spool"
        let ids = try spoolItems(["gone before", "gone while running", "kept"], in: spool, server: server)
        try FileManager.default.removeItem(atPath: spool + "/\(ids[0]).data")
        let uploader = try Uploader(.init(spool: spool, isAllowed: false, makeRequest: request(server.url("/ok"))))
        try FileManager.default.removeItem(atPath: spool + "/\(ids[1]).data")
        uploader.isAllowed = true
        uploader.start()
        let seen = await outcomes(uploader, count: 3)
        await uploader.stop()
        let missing = "its content is missing from the spool: not sent, its state kept in quarantine/"
        XCTAssertEqual(Set(seen), [.gaveUp(id: ids[0], reason: missing), .gaveUp(id: ids[1], reason: missing),
                                   .delivered(id: ids[2], attempts: 1)])
        XCTAssertEqual(uploader.statistics.gaveUp, 2)
        for id in ids[0...1] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: spool + "/quarantine/\(id).state"), id)
            XCTAssertFalse(FileManager.default.fileExists(atPath: spool + "/\(id).state"), id)
        }
        XCTAssertEqual(server.requests().count, 1)
    }

    /// The same through `logbook upload`: it said nothing of the item and exited 0. Now it names
    /// the file the content came from, counts the item as failed and exits 1.
    func testTheUploadCommandReportsAnItemWhoseContentIsGone() throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let spool = dir + "/spool"
        try Data("gone".utf8).write(to: URL(fileURLWithPath: dir + "/gone.txt"))
        try Data("kept".utf8).write(to: URL(fileURLWithPath: dir + "/kept.txt"))
        let gone: SpooledItem
        do {
            let uploader = try Uploader(.init(spool: spool, isAllowed: false, makeRequest: request(server.url("/ok"))))
            gone = try uploader.submit(file: dir + "/gone.txt")
            try uploader.submit(file: dir + "/kept.txt")
        }
        try FileManager.default.removeItem(atPath: spool + "/\(gone.id).data")
        let run = try runProgram(logbook, ["upload", "--spool", spool, "--to", server.url("/ok/{id}").absoluteString])
        XCTAssertEqual(run.status, 1, run.output)
        XCTAssertTrue(run.output.contains("gave up on \(gone.id): its content is missing from the spool (submitted from \(dir)/gone.txt)"),
                      run.output)
        XCTAssertTrue(run.output.contains("1 delivered (4 bytes), 1 failed"), run.output)
    }

    /// An outside test: a `--link` file edited in place while its body was being sent was given up
    /// (right) with "0 attempts" in the summary, although its request had gone out. An attempt
    /// that sent its body counts, failed; content found wrong before any request does not.
    func testAnAttemptGivenUpMidBodyCountsAsAnAttempt() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let uploader = try Uploader(.init(spool: dir + "/spool", maxConcurrentUploads: 1, isAllowed: false,
                                          makeRequest: request(server.url("/ok"))))
        let content = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        try Data(content).write(to: URL(fileURLWithPath: dir + "/last-byte"))
        try Data(content.reversed()).write(to: URL(fileURLWithPath: dir + "/shorter"))
        let lastByte = try uploader.submit(file: dir + "/last-byte", linking: true)
        let shorter = try uploader.submit(file: dir + "/shorter", linking: true)
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: dir + "/last-byte"))  // found as the body ends
        try handle.seek(toOffset: UInt64(content.count - 1))
        try handle.write(contentsOf: Data([content.last! &+ 1]))
        try handle.close()
        XCTAssertEqual(truncate(dir + "/shorter", 10), 0)  // found before the first byte
        uploader.isAllowed = true
        uploader.start()
        let seen = await outcomes(uploader, count: 2)
        await uploader.stop()
        let givenUp = seen.compactMap { outcome -> String? in
            guard case .gaveUp(let id, _) = outcome else { return nil }
            return id
        }
        XCTAssertEqual(Set(givenUp), Set([lastByte.id, shorter.id]), "\(seen)")
        XCTAssertEqual(uploader.statistics.attempts, 1, "the attempt that sent its body")
        XCTAssertEqual(uploader.statistics.failedAttempts, 1)
        XCTAssertGreaterThan(uploader.statistics.bytesSent, 0)
    }

    /// A symlink, FIFO or directory planted where an item's content belongs (by whoever can write
    /// the spool) is never followed nor sent: quarantined at open, or at upload.
    func testPlantedContentIsQuarantinedNeverSent() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let spool = dir + "/spool"
        let secret = dir + "/secret"
        try Data("secret".utf8).write(to: URL(fileURLWithPath: secret))
        let ids = try spoolItems(["a", "b", "c", "d"], in: spool, server: server)
        try FileManager.default.removeItem(atPath: spool + "/\(ids[0]).data")
        try FileManager.default.createSymbolicLink(atPath: spool + "/\(ids[0]).data", withDestinationPath: secret)
        try FileManager.default.removeItem(atPath: spool + "/\(ids[1]).data")
        XCTAssertEqual(mkfifo(spool + "/\(ids[1]).data", 0o600), 0)
        try FileManager.default.removeItem(atPath: spool + "/\(ids[2]).data")
        try FileManager.default.createDirectory(atPath: spool + "/\(ids[2]).data", withIntermediateDirectories: false)
        let uploader = try Uploader(.init(spool: spool, isAllowed: false, makeRequest: request(server.url("/ok"))))
        XCTAssertEqual(uploader.pending.map(\.id), [ids[3]])
        // Planted while the uploader runs: found at upload.
        try FileManager.default.removeItem(atPath: spool + "/\(ids[3]).data")
        try FileManager.default.createSymbolicLink(atPath: spool + "/\(ids[3]).data", withDestinationPath: secret)
        uploader.isAllowed = true
        uploader.start()
        let seen = await outcomes(uploader, count: 4)
        await uploader.stop()
        XCTAssertEqual(Set(seen), Set(ids.map { Uploader.Outcome.quarantined(id: $0) }))
        XCTAssertEqual(server.requests().count, 0, "nothing planted was sent")
        XCTAssertEqual(uploader.statistics.quarantined, 4)
    }

    /// F1, F1b and F1c of the outside test: a spooled file cut after spooling (its other name gone,
    /// so no link count gave it away), a hard link to an unrelated file of the same size put where
    /// an item's content belongs, and a linked archive file cut after retention deleted its name,
    /// were sent under the key of the content submitted. Now the bytes are checked against the key
    /// (the size and an archive file's header before the first byte, the SHA-256 and the frames as
    /// they stream): given up with the reason, the content kept in quarantine/, nothing arrived whole.
    func testContentThatIsNotWhatItsKeyNamesIsNeverSent() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let spool = dir + "/spool"
        let ids = try spoolItems(["first item's content", "second item's content"], in: spool, server: server)
        // cut to 5 bytes
        let cut = try XCTUnwrap(FileHandle(forWritingAtPath: spool + "/\(ids[0]).data"))
        try cut.truncate(atOffset: 5)
        try cut.close()
        // a hard link to another file of the same size
        let secret = dir + "/secret"
        try Data("SECRET item's content!".prefix(21).utf8).write(to: URL(fileURLWithPath: secret))
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: secret)).count, "second item's content".utf8.count)
        try FileManager.default.removeItem(atPath: spool + "/\(ids[1]).data")
        XCTAssertEqual(link(secret, spool + "/\(ids[1]).data"), 0)
        // a linked archive file, cut after retention deleted its name
        let bundlePath = dir + "/app.logbook"
        try writeBundle(bundlePath, rollingFiles: 1)
        let archive = bundlePath + "/archive/archive-0000000001.lba.zst"
        let archiveID: String
        do {
            let holder = try Uploader(.init(spool: spool, isAllowed: false, makeRequest: request(server.url("/ok"))))
            archiveID = try XCTUnwrap(try holder.submitArchives(in: bundlePath).first).id
        }
        try FileManager.default.removeItem(atPath: archive)
        let linked = try XCTUnwrap(FileHandle(forWritingAtPath: spool + "/\(archiveID).data"))
        try linked.truncate(atOffset: 100)
        try linked.close()
        let uploader = try Uploader(.init(spool: spool, makeRequest: request(server.url("/ok"))))
        uploader.start()
        let seen = await outcomes(uploader, count: 3)
        await uploader.stop()
        XCTAssertEqual(seen.count, 3, "\(seen)")
        for outcome in seen {
            guard case .gaveUp(let id, let reason) = outcome else { XCTFail("\(outcome)"); continue }
            XCTAssertTrue(reason.contains("its key names") && reason.hasSuffix("not sent"), reason)
            XCTAssertTrue(FileManager.default.fileExists(atPath: spool + "/quarantine/\(id).data"), "kept: \(id)")
        }
        XCTAssertEqual(Set(seen.map { outcome -> String in
            if case .gaveUp(let id, _) = outcome { return id }
            return ""
        }), Set(ids + [archiveID]))
        // A body is checked as it streams, its last bytes held back until all passed: a request
        // may have begun, but none arrived whole (each was cut short, unanswered).
        XCTAssertEqual(server.requests().filter { ($0["answer"] as? String) != "short" }.count, 0,
                       "nothing arrived whole under a key its bytes do not match: \(server.requests())")
        XCTAssertEqual(uploader.statistics.gaveUp, 3)
    }

    /// F1 of the outside test, an edit of the same size: a linked archive file changed in place
    /// after it was spooled (its size, header and key unchanged) was sent under its key. Its bytes
    /// are checked as they stream (a .lba frame by frame, a .lba.zst by its header, layout,
    /// listing, table, footer and its data frames' CRCs): given up with the reason, kept in quarantine/, and the body cut
    /// before its end, so that the server never gets it whole; the untouched file is delivered.
    func testAnArchiveFileEditedInPlaceIsNeverSentUnderItsKey() async throws {
        for (compressed, place) in [(false, "a chunk's body"), (false, "the END frame"), (true, "a data frame"), (true, "the listing"),
                                    (true, "the seek table")] {
            let dir = makeTemporaryDirectory(self)
            let server = try UploadServer(directory: dir, keepsBodies: true)
            let bundlePath = dir + "/app.logbook"
            try writeBundle(bundlePath, rollingFiles: 2, compressionLevel: compressed ? 1 : nil)
            let uploader = try Uploader(.init(spool: dir + "/spool", isAllowed: false, makeRequest: request(server.url("/ok"))))
            let items = try uploader.submitArchives(in: bundlePath)
            XCTAssertEqual(items.count, 2)
            let edited = bundlePath + "/archive/archive-0000000002.lba" + (compressed ? ".zst" : "")
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: edited)))
            let offset: Int
            switch place {
            case "a chunk's body": offset = 64 + 16 + 200
            case "a data frame": offset = 72 + 100
            case "the END frame": offset = bytes.count - 20
            case "the listing":
                let footer = bytes.count - 64
                offset = Int(bytes[footer + 16..<footer + 24].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }) + 12
            default: offset = bytes.count - 64 - 8
            }
            let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: edited))
            try handle.seek(toOffset: UInt64(offset))
            try handle.write(contentsOf: Data([bytes[offset] ^ 0x5a]))
            try handle.close()
            uploader.isAllowed = true
            uploader.start()
            let seen = await outcomes(uploader, count: 2)
            await uploader.stop()
            XCTAssertTrue(seen.contains(.delivered(id: items[0].id, attempts: 1)), "\(place): \(seen)")
            let gaveUp = seen.compactMap { outcome -> String? in
                if case .gaveUp(let id, let reason) = outcome, id == items[1].id { return reason }
                return nil
            }
            XCTAssertEqual(gaveUp.count, 1, "\(place): \(seen)")
            XCTAssertTrue(gaveUp.first?.contains("not what its key names") == true, "\(place): \(gaveUp)")
            let whole = server.requests().filter { ($0["answer"] as? Int) == 201 }
            XCTAssertEqual(whole.count, 1, "\(place): only the untouched file arrived whole")
            XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/spool/quarantine/\(items[1].id).data"), place)
        }
    }

    /// The transport frames the body: a Content-Length or Transfer-Encoding the request builder
    /// sets is removed (it would cut the body short and smuggle the rest as another request).
    func testTheCallersFramingHeadersAreRemoved() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let url = server.url("/ok")
        let uploader = try Uploader(.init(spool: dir + "/spool") { _ in
            DeliveryRequest(method: "POST", url: url.absoluteString,
                            headers: [("Content-Length", "5"), ("Transfer-Encoding", "chunked")])
        })
        let body = [UInt8](repeating: 7, count: 1000)
        let item = try uploader.submit(data: body)
        uploader.start()
        let seen = await outcomes(uploader, count: 1)
        await uploader.stop()
        XCTAssertEqual(seen, [.delivered(id: item.id, attempts: 1)])
        XCTAssertEqual(server.requests().count, 1, "no second request smuggled in the body")
        XCTAssertEqual(try Array(Data(contentsOf: URL(fileURLWithPath: server.bodies + "/" + item.id))), body)
    }

    /// The caller's id names one content: the same again is the same item, other content is EEXIST.
    func testACallersIdWithOtherContentIsRefused() throws {
        let dir = makeTemporaryDirectory(self)
        let uploader = try Uploader(.init(spool: dir + "/spool", isAllowed: false, makeRequest: request(URL(string: "http://127.0.0.1:9/")!)))
        let first = try uploader.submit(data: Array("first content".utf8), id: "report-1")
        XCTAssertEqual(try uploader.submit(data: Array("first content".utf8), id: "report-1"), first)
        for other in ["second content", "first contenT", "first content!"] {
            XCTAssertThrowsError(try uploader.submit(data: Array(other.utf8), id: "report-1"), other) { error in
                XCTAssertEqual((error as? LogbookError)?.errno, EEXIST)
                XCTAssertTrue("\(error)".contains("already spooled with other content"), "\(error)")
            }
        }
        let file = dir + "/other"
        try Data("file content".utf8).write(to: URL(fileURLWithPath: file))
        XCTAssertThrowsError(try uploader.submit(file: file, id: "report-1"))
        XCTAssertEqual(uploader.pending.count, 1)
    }

    /// An uploader dropped without `stop()` releases its spool once its uploads in flight end: a
    /// new one on the same spool opens (idle workers do not keep it alive).
    func testAnUploaderDroppedWithoutStopReleasesTheSpool() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        do {
            let uploader = try Uploader(.init(spool: dir + "/spool", makeRequest: request(server.url("/ok"))))
            for index in 0..<5 { try uploader.submit(data: [UInt8(index)]) }
            uploader.start()
            try await Task.sleep(for: .milliseconds(30))
        }
        var reopened: Uploader?
        _ = await eventually {
            reopened = try? Uploader(.init(spool: dir + "/spool", makeRequest: request(server.url("/ok"))))
            return reopened != nil
        }
        XCTAssertNotNil(reopened, "the spool stayed locked by an uploader nobody holds")
    }

    /// `logbook upload`'s answers to mistakes: framing headers refused, a directory that is no
    /// bundle refused, two paths with one content uploaded once and said so, a second run sends
    /// nothing, a FIFO refused without blocking; the reason per item and exit 1 when one gave up.
    func testTheUploadCommandSaysWhatItDid() throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let spool = ["--spool", dir + "/spool"]
        let to = "http://127.0.0.1:\(server.port)/ok/{name}"
        let header = try runProgram(logbook, ["upload", "--to", to, "--header", "Content-Length: 5"] + spool + [dir])
        XCTAssertEqual(header.status, 64, header.output)
        XCTAssertTrue(header.output.contains("is set by the transport"), header.output)
        let plain = dir + "/plain"
        try FileManager.default.createDirectory(atPath: plain, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: plain + "/notes.txt"))
        let notBundle = try runProgram(logbook, ["upload", "--to", to] + spool + [plain])
        XCTAssertEqual(notBundle.status, 1, notBundle.output)
        XCTAssertTrue(notBundle.output.contains("neither a bundle nor a directory of archive files"), notBundle.output)
        try Data("same".utf8).write(to: URL(fileURLWithPath: dir + "/one.txt"))
        try Data("same".utf8).write(to: URL(fileURLWithPath: dir + "/two.txt"))
        XCTAssertEqual(mkfifo(dir + "/fifo", 0o600), 0)
        let run = try runProgram(logbook, ["upload", "--to", to] + spool + [dir + "/one.txt", dir + "/two.txt", dir + "/fifo"])
        XCTAssertEqual(run.status, 1, run.output)
        XCTAssertTrue(run.output.contains("two.txt: the same content as one.txt, uploaded once"), run.output)
        XCTAssertTrue(run.output.contains("delivered one.txt (1 attempt)"), run.output)
        XCTAssertTrue(run.output.contains("only a regular file can be uploaded"), run.output)
        XCTAssertTrue(run.output.contains("1 delivered (4 bytes), 1 failed"), run.output)
        let again = try runProgram(logbook, ["upload", "--to", to] + spool + [dir + "/one.txt"])
        XCTAssertEqual(again.status, 0, again.output)
        XCTAssertTrue(again.output.contains("delivered before (--again uploads it again)"), again.output)
        let refused = try runProgram(logbook, ["upload", "--to", "http://127.0.0.1:\(server.port)/status/403"] + spool
                                     + ["--again", dir + "/one.txt"])
        XCTAssertEqual(refused.status, 1, refused.output)
        XCTAssertTrue(refused.output.contains("gave up on one.txt: HTTP 403"), refused.output)
        XCTAssertEqual(server.requests().count, 2)
        // --again sends a bundle's delivered files again, too.
        let bundlePath = dir + "/again.logbook"
        try writeBundle(bundlePath, rollingFiles: 2)
        let first = try runProgram(logbook, ["upload", "--to", to] + spool + [bundlePath])
        XCTAssertTrue(first.output.contains("2 delivered"), first.output)
        let none = try runProgram(logbook, ["upload", "--to", to] + spool + [bundlePath])
        XCTAssertTrue(none.output.contains("no archive files left to upload"), none.output)
        let resent = try runProgram(logbook, ["upload", "--to", to, "--again"] + spool + [bundlePath])
        XCTAssertEqual(resent.status, 0, resent.output)
        XCTAssertTrue(resent.output.contains("delivered archive-0000000001.lba") && resent.output.contains("2 delivered"), resent.output)
        XCTAssertEqual(server.requests().count, 6)
    }

    /// `stop()` finishes `outcomes`: the README's reading task ends, and with it its reference to
    /// the uploader, so the spool can be opened again in the same process.
    func testStopFinishesOutcomesAndReleasesTheSpool() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        var reader: Task<Int, Never>?
        do {
            let uploader = try Uploader(.init(spool: dir + "/spool", makeRequest: request(server.url("/ok"))))
            try uploader.submit(data: [1])
            uploader.start()
            reader = Task {
                var count = 0
                for await _ in uploader.outcomes { count += 1 }
                return count
            }
            let delivered = await eventually { uploader.statistics.delivered > 0 }
            XCTAssertTrue(delivered)
            await uploader.stop()
            uploader.start()  // nothing after stop
        }
        let count = await reader!.value
        XCTAssertEqual(count, 1)
        var reopened: Uploader?
        _ = await eventually {
            reopened = try? Uploader(.init(spool: dir + "/spool", makeRequest: request(server.url("/ok"))))
            return reopened != nil
        }
        XCTAssertNotNil(reopened)
    }

    /// A purge while an item is being uploaded: a server that takes it makes it delivered (never
    /// reported dropped after its 2xx); one that never answers makes it dropped when the attempt ends.
    func testPurgeDuringAnUploadReportsWhatReallyHappened() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        // The held request is answered once the purge is done (answered after half a second, it
        // could be delivered before a loaded machine came to the purge); the stalled attempt ends
        // by its 2 s timeout (a purge after it drops the item all the same).
        for (path, timeout, expectDelivered) in [("/hold", 60, true), ("/stall", 2, false)] {
            let uploader = try Uploader(.init(spool: dir + "/spool" + path.replacingOccurrences(of: "/", with: "-"),
                                              timeout: .seconds(timeout), makeRequest: request(server.url(path))))
            let item = try uploader.submit(data: [UInt8](repeating: 1, count: 100), id: "item" + path.replacingOccurrences(of: "/", with: "-"))
            uploader.start()
            let inFlight = await eventually { uploader.statistics.uploading > 0 }
            XCTAssertTrue(inFlight, path)
            XCTAssertEqual(uploader.purge(), 1)
            server.release()
            let seen = await outcomes(uploader, count: 1)
            await uploader.stop()
            XCTAssertEqual(seen, [expectDelivered ? .delivered(id: item.id, attempts: 1) : .dropped(id: item.id, reason: "purged")], path)
            XCTAssertEqual(uploader.pending, [])
        }
    }

    /// A caller's id cannot take the shape of the ids Logbook makes, so it can never block one.
    func testCallersIdsCannotLookLikeLogbooksOwn() throws {
        let dir = makeTemporaryDirectory(self)
        let uploader = try Uploader(.init(spool: dir + "/spool", isAllowed: false, makeRequest: request(URL(string: "http://127.0.0.1:9/")!)))
        for id in [SHA256.hex(of: Array("one".utf8)), "lba-1-1"] {
            XCTAssertThrowsError(try uploader.submit(data: Array("two".utf8), id: id)) { error in
                XCTAssertEqual((error as? LogbookError)?.errno, EINVAL)
                XCTAssertTrue("\(error)".contains("has the shape of Logbook's own"), "\(error)")
            }
        }
        XCTAssertEqual(try uploader.submit(data: Array("one".utf8)).id, SHA256.hex(of: Array("one".utf8)))
    }

    /// An unusable quarantine directory (a file in its place) does not stop the spool: the damaged
    /// item is reported and left out, the others are delivered.
    func testAnUnusableQuarantineStopsNothing() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let spool = dir + "/spool"
        let ids = try spoolItems(["a", "b"], in: spool, server: server)
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: spool + "/\(ids[0]).state"))
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: spool + "/quarantine"))
        let uploader = try Uploader(.init(spool: spool, makeRequest: request(server.url("/ok"))))
        uploader.start()
        let seen = await outcomes(uploader, count: 2)
        await uploader.stop()
        XCTAssertEqual(seen, [.quarantined(id: ids[0]), .delivered(id: ids[1], attempts: 1)])
    }

    /// Finding 12 of the fourth outside test: a symlink planted as the spool's `quarantine` (or
    /// `given-up`) was followed, so damaged items were moved out of the spool, wherever it pointed.
    /// Now the directory is opened without following a symlink, and refused when it is not a
    /// private directory: the item is reported (quarantined, or given up) and stays in the spool.
    func testASymlinkPlantedAsAQuarantineIsNeverFollowed() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let elsewhere = dir + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let spool = dir + "/spool"
        let ids = try spoolItems(["damaged", "good"], in: spool, server: server)
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: spool + "/\(ids[0]).state"))
        try FileManager.default.createSymbolicLink(atPath: spool + "/quarantine", withDestinationPath: elsewhere)
        do {
            let uploader = try Uploader(.init(spool: spool, makeRequest: request(server.url("/ok"))))
            uploader.start()
            let seen = await outcomes(uploader, count: 2)
            await uploader.stop()
            XCTAssertEqual(seen, [.quarantined(id: ids[0]), .delivered(id: ids[1], attempts: 1)])
        }
        // Given up and kept (keepsGivenUpItems): `given-up` planted as a symlink.
        let refusedSpool = dir + "/refused-spool"
        let refused = try spoolItems(["refused"], in: refusedSpool, server: server)
        try FileManager.default.createSymbolicLink(atPath: refusedSpool + "/given-up", withDestinationPath: elsewhere)
        let uploader = try Uploader(.init(spool: refusedSpool, keepsGivenUpItems: true, makeRequest: request(server.url("/status/400"))))
        uploader.start()
        let seen = await outcomes(uploader, count: 1)
        await uploader.stop()
        XCTAssertEqual(seen, [.gaveUp(id: refused[0], reason: "HTTP 400")])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: elsewhere), [], "moved through a planted symlink")
        XCTAssertTrue(FileManager.default.fileExists(atPath: spool + "/\(ids[0]).data"), "the damaged item stays in the spool")
    }

    /// Finding 4 of the fourth outside test: two 3 MB items spooled, then `logbook upload
    /// --spool-quota 4`: one was delivered and the other left the spool unsent and unreported, exit
    /// 0. Past the quota the oldest goes, reported as dropped, and the run exits 1.
    func testTheUploadCommandReportsItemsTheQuotaDropsAsTheSpoolOpens() throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let spool = dir + "/spool"
        let ids: [String]
        do {
            let uploader = try Uploader(.init(spool: spool, isAllowed: false, makeRequest: request(server.url("/ok"))))
            ids = try (0..<2).map { index in try uploader.submit(data: [UInt8](repeating: UInt8(index), count: 3_000_000)).id }
        }
        let run = try runProgram(logbook, ["upload", "--spool", spool, "--spool-quota", "4", "--to", server.url("/ok/{id}").absoluteString])
        XCTAssertEqual(run.status, 1, run.output)
        XCTAssertTrue(run.output.contains("dropped \(ids[0]): the spool's quota of 4194304 bytes was reached"), run.output)
        XCTAssertTrue(run.output.contains("delivered \(ids[1]) (1 attempt)"), run.output)
        XCTAssertTrue(run.output.contains("1 delivered (3000000 bytes), 1 failed"), run.output)
        XCTAssertEqual(server.requests().count, 1)
    }

    /// An archive file submitted by its path is the same item as through its directory (one id,
    /// lba-RING-NUMBER, and a hard link): the directory afterwards submits it no more.
    func testAnArchiveFileIsOneItemHoweverItIsSubmitted() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let bundlePath = dir + "/app.logbook"
        try writeBundle(bundlePath, rollingFiles: 2)
        let first = bundlePath + "/archive/archive-0000000001.lba.zst"
        let uploader = try Uploader(.init(spool: dir + "/spool", makeRequest: request(server.url("/ok"))))
        let item = try XCTUnwrap(try uploader.submitUnlessDelivered(file: first))
        XCTAssertTrue(item.id.hasPrefix("lba-") && item.id.hasSuffix("-1"), item.id)
        XCTAssertEqual(try uploader.submit(file: first).id, item.id)
        uploader.start()
        _ = await outcomes(uploader, count: 1)
        XCTAssertEqual(try uploader.submitArchives(in: bundlePath).map { String($0.id.split(separator: "-").last!) }, ["2"])
        _ = await outcomes(uploader, count: 1)
        await uploader.stop()
        XCTAssertEqual(server.requests().count, 2)
    }

    /// F9 of the outside test: one symlink named like an archive file in a bundle's archive
    /// directory ended the run with "0 delivered, 1 failed"; the good files went only on a later
    /// run. Now the bad entry is reported on its own (never followed) and the rest is submitted.
    func testOneBadEntryInAnArchiveDirectoryIsReportedAndTheRestGoes() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let bundlePath = dir + "/app.logbook"
        try writeBundle(bundlePath, rollingFiles: 3)
        let secret = dir + "/secret"
        try Data("secret".utf8).write(to: URL(fileURLWithPath: secret))
        try FileManager.default.createSymbolicLink(atPath: bundlePath + "/archive/archive-0000000009.lba",
                                                   withDestinationPath: secret)
        XCTAssertEqual(mkfifo(bundlePath + "/archive/archive-0000000010.lba", 0o600), 0)
        let uploader = try Uploader(.init(spool: dir + "/spool", makeRequest: request(server.url("/ok"))))
        uploader.start()
        let submitted = try uploader.submitArchives(in: bundlePath)
        XCTAssertEqual(submitted.map { String($0.id.split(separator: "-").last!) }, ["1", "2", "3"])
        let seen = await outcomes(uploader, count: 5)
        await uploader.stop()
        let notSubmitted = seen.compactMap { outcome -> String? in
            if case .notSubmitted(let path, let reason) = outcome, reason.contains("not a regular file") { return path }
            return nil
        }
        XCTAssertEqual(Set(notSubmitted), [bundlePath + "/archive/archive-0000000009.lba", bundlePath + "/archive/archive-0000000010.lba"])
        XCTAssertEqual(seen.filter { if case .delivered = $0 { return true } else { return false } }.count, 3)
        XCTAssertEqual(uploader.statistics.notSubmitted, 2)
        XCTAssertEqual(server.requests().count, 3, "nothing through the link or the FIFO")
        for body in try FileManager.default.contentsOfDirectory(atPath: server.bodies) {
            XCTAssertNotEqual(try Data(contentsOf: URL(fileURLWithPath: server.bodies + "/" + body)), Data("secret".utf8))
        }
    }

    /// The spool on a full 1 MiB tmpfs: the submission that does not fit throws ENOSPC with the
    /// path, and everything accepted before is delivered whole.
    func testASpoolOnAFullDiskRefusesClearlyAndLosesNothingAccepted() async throws {
        let dir = makeTemporaryDirectory(self)
        let mountPoint = dir + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard (try? runProgram("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint]))?.status == 0 else {
            throw XCTSkip("cannot mount a tmpfs here (not root?)")
        }
        defer { _ = try? runProgram("/bin/umount", ["-l", mountPoint]) }
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let uploader = try Uploader(.init(spool: mountPoint + "/spool", isAllowed: false, makeRequest: request(server.url("/ok"))))
        var accepted: [String: [UInt8]] = [:]
        var refusal: LogbookError?
        for index in 0..<20 {
            let bytes = (0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
            do {
                let item = try uploader.submit(data: bytes)
                accepted[item.id] = bytes
            } catch {
                refusal = error
                break
            }
        }
        let error = try XCTUnwrap(refusal, "a 1 MiB disk cannot hold 3 MB")
        XCTAssertEqual(error.errno, ENOSPC)
        XCTAssertTrue("\(error)".contains(mountPoint + "/spool"), "\(error)")
        XCTAssertGreaterThanOrEqual(accepted.count, 3)
        XCTAssertEqual(Set(uploader.pending.map(\.id)), Set(accepted.keys), "the failed submission left nothing behind")
        uploader.isAllowed = true
        uploader.start()
        let seen = await outcomes(uploader, count: accepted.count)
        await uploader.stop()
        XCTAssertEqual(seen.count, accepted.count)
        for (id, bytes) in accepted {
            XCTAssertEqual(try? Array(Data(contentsOf: URL(fileURLWithPath: server.bodies + "/" + id))), bytes, id)
        }
    }

    /// Given up with `keepsGivenUpItems`: kept in given-up/ for a person, not resumed.
    func testGivenUpItemsAreKeptWhenAsked() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let uploader = try Uploader(.init(spool: dir + "/spool", keepsGivenUpItems: true, makeRequest: request(server.url("/status/413"))))
        let item = try uploader.submit(data: [1, 2])
        uploader.start()
        let seen = await outcomes(uploader, count: 1)
        await uploader.stop()
        XCTAssertEqual(seen, [.gaveUp(id: item.id, reason: "HTTP 413")])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir + "/spool/given-up").sorted(),
                       [item.id + ".data", item.id + ".state"])
        XCTAssertEqual(uploader.statistics.gaveUp, 1)
    }

    /// A file system without user extended attributes (ramfs): the delivery mark lives in the
    /// spool's delivered/, and the relaunch still submits nothing twice; marks of files gone are pruned.
    func testDeliveryMarksWithoutExtendedAttributes() async throws {
        let dir = makeTemporaryDirectory(self)
        let mountPoint = dir + "/ramfs"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard (try? runProgram("/bin/mount", ["-t", "ramfs", "ramfs", mountPoint]))?.status == 0 else {
            throw XCTSkip("cannot mount a ramfs here (not root?)")
        }
        defer { _ = try? runProgram("/bin/umount", ["-l", mountPoint]) }
        let server = try UploadServer(directory: dir)
        let bundlePath = mountPoint + "/app.logbook"
        try writeBundle(bundlePath, rollingFiles: 3)
        // The spool on another file system: submissions are copies, marks go to the spool.
        let spool = dir + "/spool"
        do {
            let uploader = try Uploader(.init(spool: spool, makeRequest: request(server.url("/ok"))))
            let items = try uploader.submitArchives(in: bundlePath)
            XCTAssertEqual(items.count, 3)
            uploader.start()
            let seen = await outcomes(uploader, count: 3)
            await uploader.stop()
            XCTAssertEqual(seen.count, 3)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool + "/delivered").sorted(), items.map(\.id).sorted())
        }
        try FileManager.default.removeItem(atPath: bundlePath + "/archive/archive-0000000001.lba.zst")
        do {
            let relaunched = try Uploader(.init(spool: spool, makeRequest: request(server.url("/ok"))))
            XCTAssertEqual(try relaunched.submitArchives(in: bundlePath), [])
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool + "/delivered").count, 2, "the gone file's mark pruned")
        }
        // Another destination: its own marks (ID~TAG), so the files go there too, and are pruned alike.
        let elsewhere = try Uploader(.init(spool: spool, isAllowed: false, destination: "PUT http://elsewhere/",
                                           makeRequest: request(server.url("/ok"))))
        XCTAssertEqual(try elsewhere.submitArchives(in: bundlePath).count, 2)
    }

    /// A file delivered to one URL is uploaded to another (the outside test saw "delivered before"
    /// and nothing sent): delivery marks are per destination, and --again is needed only for the
    /// same one. Bundles alike.
    func testAFileDeliveredToOneDestinationIsUploadedToAnother() throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let spool = ["--spool", dir + "/spool"]
        let first = "http://127.0.0.1:\(server.port)/ok/first/{name}", second = "http://127.0.0.1:\(server.port)/ok/second/{name}"
        try Data("report".utf8).write(to: URL(fileURLWithPath: dir + "/report.txt"))
        let bundlePath = dir + "/app.logbook"
        try writeBundle(bundlePath, rollingFiles: 2)
        for (to, expected) in [(first, "3 delivered"), (second, "3 delivered")] {
            let run = try runProgram(logbook, ["upload", "--to", to] + spool + [dir + "/report.txt", bundlePath])
            XCTAssertEqual(run.status, 0, run.output)
            XCTAssertTrue(run.output.contains(expected), "\(to): \(run.output)")
        }
        let again = try runProgram(logbook, ["upload", "--to", first] + spool + [dir + "/report.txt", bundlePath])
        XCTAssertTrue(again.output.contains("delivered before (--again uploads it again)"), again.output)
        XCTAssertTrue(again.output.contains("no archive files left to upload"), again.output)
        let paths = server.requests().compactMap { $0["path"] as? String }
        XCTAssertEqual(paths.filter { $0.hasPrefix("/ok/first/") }.count, 3, "\(paths)")
        XCTAssertEqual(paths.filter { $0.hasPrefix("/ok/second/") }.count, 3, "\(paths)")
    }

    /// The kill loop: `logbook upload` of 20 files of varied sizes to a server that fails a third of
    /// requests (503 or a reset mid-body), SIGKILLed at random moments for 50 cycles, then run to
    /// the end. Every file arrives whole at least once; after every kill, an item gone from the
    /// spool had its 2xx first; repeats (same key) are counted and reported.
    func testKillLoopDeliversEveryFileAtLeastOnceAndNeverDeletesBeforeA2xx() throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        var generator = SplitMix64(state: 12)
        var files: [String: String] = [:]  // id -> path
        for index in 0..<20 {
            let size = [0, 1, 100, 4096, 65_536, 1 << 20, 3 << 20][index % 7] + index
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let path = dir + "/file-\(index).bin"
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            files[SHA256.hex(of: bytes)] = path
        }
        let spool = dir + "/spool"
        let arguments = ["upload", "--spool", spool, "--max-delay", "0", "--max-attempts", "1000", "--timeout", "60",
                         "--to", "http://127.0.0.1:\(server.port)/flaky/{name}"] + files.values.sorted()
        let cycles = Int(ProcessInfo.processInfo.environment["LOGBOOK_UPLOAD_KILL_CYCLES"] ?? "") ?? 50
        var everSpooled = Set<String>()
        var cyclesWithUploads = 0
        for cycle in 0..<cycles {
            // Killed 0-0.5 s after its first request arrived (the server reads flaky bodies at a
            // fixed 2 MB/s, so most kills land in a body), or once it ended by itself (nothing
            // left to upload): where a kill lands never depends on how fast this machine starts it.
            let arrived = server.arrivals()
            let process = try launch(logbook, arguments)
            XCTAssertTrue(waitUntil { server.arrivals() > arrived || !process.isRunning }, "cycle \(cycle): no request, still running")
            if process.isRunning {
                cyclesWithUploads += 1
                usleep(UInt32.random(in: 0...500_000, using: &generator))
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let spooled = Set(((try? FileManager.default.contentsOfDirectory(atPath: spool)) ?? [])
                .filter { $0.hasSuffix(".data") }.map { String($0.dropLast(5)) })
            everSpooled.formUnion(spooled)
            let acknowledged = Set(server.requests().filter { ($0["answer"] as? Int).map { (200..<300).contains($0) } ?? false }
                .compactMap { ($0["key"] as? String)?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) })
            for id in everSpooled.subtracting(spooled) {
                XCTAssertTrue(acknowledged.contains(id), "cycle \(cycle): \(id) left the spool without a 2xx")
            }
        }
        // The last run, to the end (the server still fails a third of the requests).
        let (status, output) = try runProgram(logbook, arguments)
        XCTAssertEqual(status, 0, output)
        let requests = server.requests()
        var delivered: [String: Int] = [:]
        for request in requests {
            guard let answer = request["answer"] as? Int, (200..<300).contains(answer),
                  let key = (request["key"] as? String)?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) else { continue }
            XCTAssertEqual(request["sha256"] as? String, key, "a body arrived altered: \(request), files: \(files)")
            delivered[key, default: 0] += 1
        }
        XCTAssertEqual(Set(delivered.keys), Set(files.keys), "every file arrived")
        let repeats = delivered.values.reduce(0) { $0 + $1 - 1 }
        print("kill loop: \(cycles) kills (\(cyclesWithUploads) after an upload began), \(requests.count) requests, \(files.count) files, \(repeats) delivered more than once (same key)")
        // 9 MB of bodies read at 2 MB/s take more than a few kills of 0.5 s each.
        XCTAssertGreaterThanOrEqual(cyclesWithUploads, min(cycles, 3), "kills must land while uploading")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool).filter { $0.hasSuffix(".data") }, [])
        // Running it again sends nothing: every file is marked delivered.
        let again = try runProgram(logbook, arguments)
        XCTAssertEqual(again.status, 0, again.output)
        XCTAssertEqual(server.requests().count, requests.count)
    }
}
