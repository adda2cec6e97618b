import CLogbook
import CLogbookUpload
import Foundation
import Logbook
import LogbookTestKit
import XCTest
@testable import LogbookUpload

/// Resumable uploads (draft-ietf-httpbis-resumable-upload, interop version 6) against a real
/// server: connections cut mid-body and `logbook upload` killed mid-body resume at the server's
/// offset, and the file arrives byte-exact with little sent twice.
/// Those of its tests that CI also runs under ThreadSanitizer are in `ResumableUploadConcurrencyTests`.
final class ResumableUploadTests: XCTestCase, ResumableUploadTestCase {
    /// An upload the server never moves forward (its offset stays 0, every append meets 409) earns
    /// no credit: the policy's attempts run out as for any failure.
    func testAnUploadThatNeverMovesExhaustsTheAttempts() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let url = server.url("/resumable-stuck/x").absoluteString
        let uploader = try Uploader(.init(spool: dir + "/spool", policy: RetryPolicy(maxDelay: .zero, maxAttempts: 4)) { _ in
            DeliveryRequest(method: "PUT", url: url)
        })
        let item = try uploader.submit(data: Array(repeating: 3, count: 1 << 20))
        let outcome = await firstOutcome(of: uploader)
        guard case .gaveUp(item.id, let reason) = outcome else { return XCTFail("\(String(describing: outcome))") }
        XCTAssertTrue(reason.hasPrefix("4 attempts"), reason)
        let answers = server.requests().map { "\($0["answer"] ?? "")" }
        XCTAssertEqual(answers.first, "503", "the creation, answered 503 after its 104: \(answers)")
        XCTAssertEqual(answers.filter { $0 == "head" }.count, 3, "\(answers)")
        XCTAssertEqual(answers.filter { $0 == "409" }.count, 3, "\(answers)")
    }

    /// 20 SIGKILLs of `logbook upload` while it uploads 300 MB, each when the server has read the
    /// next of 20 random byte counts (so each run was killed mid-body, however fast this machine):
    /// every relaunch resumes at the server's offset, the file arrives byte-exact, and the bytes
    /// sent in all are at most 1.2 times its size.
    func testTwentyKillsWhileUploading300MBSendAtMostATenthTwice() throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        let dir = makeTemporaryDirectory(self)
        let size = 300_000_000
        // The server stops reading 40 MB before the end until the test releases it, so the
        // upload cannot end before the last kill, however fast the machine; the kills come at
        // byte counts it read, so each lands in a body.
        let held = size - 40_000_000
        let server = try ResumableUploadServer(directory: dir + "/server", rate: 150_000_000, holdAfter: held)
        let digest = try randomFile(dir + "/big.bin", bytes: size, seed: 11)
        var generator = SplitMix64(state: 99)
        let kills = 20
        let marks = (0..<kills).map { _ in Int.random(in: 2_000_000..<(held - 2_000_000), using: &generator) }.sorted()
        let base = ["upload", "--spool", dir + "/spool", "--max-delay", "0", "--max-attempts", "1000",
                    "--to", "http://127.0.0.1:\(server.port)/files/{name}"]
        var process = try launch(logbook, base + [dir + "/big.bin"])
        var killed = 0
        for mark in marks {
            XCTAssertTrue(waitUntil(seconds: 300) { server.received >= mark || !process.isRunning }, "no progress to byte \(mark)")
            guard process.isRunning else { break }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            killed += 1
            process = try launch(logbook, base)  // what the spool holds
        }
        server.release()
        XCTAssertTrue(waitUntil(seconds: 300) { !process.isRunning }, "the last run ends")
        XCTAssertEqual(process.terminationStatus, 0)
        print("resumable upload: \(killed) kills, \(server.received) bytes read for \(size), \(server.completed.count) uploads completed")
        XCTAssertEqual(killed, kills, "every kill landed while uploading")
        XCTAssertEqual(server.completed.map(\.bytes), [size])
        XCTAssertEqual(try sha256(ofFile: server.stored("/files/big.bin")), digest, "byte-exact")
        XCTAssertLessThanOrEqual(server.received, size * 12 / 10, "sent in all")
    }

    /// A server that does not speak resumable uploads ignores the offer: the upload is a plain PUT.
    /// One that sends a 104 whose upload URL is on another origin is not followed there (the
    /// request's credentials would go with it).
    func testAPlainServerGetsAPlainRequestAndAForeignUploadURLIsIgnored() {
        func location(_ headers: [(name: String, value: String)], _ request: String) -> ResumableUpload.Location {
            ResumableUpload.location(in: headers, sentTo: request)
        }
        func isIgnored(_ location: ResumableUpload.Location) -> Bool {
            if case .ignored = location { return true }
            return false
        }
        XCTAssertTrue(isIgnored(location([("Upload-Draft-Interop-Version", "6"), ("Location", "http://evil.example/u/1")], "http://127.0.0.1:8080/files/x")))
        XCTAssertEqual(location([("Upload-Draft-Interop-Version", "6"), ("Location", "/resumable_upload/abc")], "http://127.0.0.1:8080/files/x?token=1"),
                       .kept("http://127.0.0.1:8080/resumable_upload/abc"))
        XCTAssertEqual(location([("upload-draft-interop-version", "6"), ("location", "http://127.0.0.1:8080/r/1")], "http://127.0.0.1:8080/files/x"),
                       .kept("http://127.0.0.1:8080/r/1"))
        XCTAssertEqual(location([("Upload-Draft-Interop-Version", "5"), ("Location", "/r/1")], "http://127.0.0.1:8080/x"), .none,
                       "another interop version")
        XCTAssertTrue(isIgnored(location([("Upload-Draft-Interop-Version", "6"), ("Location", "https://127.0.0.1:8080/r/1")], "http://127.0.0.1:8080/x")),
                      "another scheme")
        XCTAssertTrue(isIgnored(location([("Upload-Draft-Interop-Version", "6"), ("Location", "//evil.example/r/1")], "http://127.0.0.1:8080/x")),
                      "a network-path reference")
    }
}
