import Foundation
import XCTest
@testable import LogbookUpload

/// The resumable-upload server of Tests/ResumableUploadServer (swift-nio-extras'
/// NIOResumableUpload), built by `scripts/test` (or here, when it is missing) and started on
/// 127.0.0.1 by the test.
final class ResumableUploadServer {
    let process = Process()
    let lifeline = Pipe()
    let port: Int
    let directory: String

    static let executable = repositoryRoot + "/Tests/ResumableUploadServer/.build/debug/ResumableUploadServer"

    init(directory: String, rate: Int? = nil, cutAfter: Int? = nil) throws {
        if !FileManager.default.isExecutableFile(atPath: Self.executable) {
            let (status, output) = try runProgram("/usr/bin/env", ["swift", "build", "--package-path", repositoryRoot + "/Tests/ResumableUploadServer"])
            guard status == 0 else { throw XCTSkip("the resumable-upload server did not build: \(output.suffix(2000))") }
        }
        self.directory = directory
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = [directory] + (rate.map { ["--rate", String($0)] } ?? []) + (cutAfter.map { ["--cut-after", String($0)] } ?? [])
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = lifeline
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw XCTSkip("the resumable-upload server did not start: \(line)")
        }
        self.port = port
    }

    deinit {
        try? lifeline.fileHandleForWriting.close()
        process.terminate()
    }

    /// Bytes read from all connections so far (headers and bodies).
    var received: Int {
        (try? String(contentsOfFile: directory + "/received", encoding: .utf8)).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 0
    }

    /// The uploads that completed: path and bytes.
    var completed: [(path: String, bytes: Int)] {
        let text = (try? String(contentsOfFile: directory + "/completed", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            return parts.count == 2 ? (String(parts[0]), Int(parts[1]) ?? -1) : nil
        }
    }

    /// What the server stored for an upload to `path`.
    func stored(_ path: String) -> String { directory + "/uploads/" + path.replacingOccurrences(of: "/", with: "_") }
}

/// Resumable uploads (draft-ietf-httpbis-resumable-upload, interop version 6) against a real
/// server: connections cut mid-body and `logbook upload` killed mid-body resume at the server's
/// offset, and the file arrives byte-exact with little sent twice.
final class ResumableUploadTests: XCTestCase {
    func randomFile(_ path: String, bytes: Int, seed: UInt64) throws -> String {
        var generator = SplitMix64(state: seed)
        var data = [UInt8](repeating: 0, count: bytes)
        data.withUnsafeMutableBytes { buffer in
            let words = buffer.bindMemory(to: UInt64.self)
            for i in words.indices { words[i] = generator.next() }
        }
        try Data(data).write(to: URL(fileURLWithPath: path))
        return SHA256.hex(of: data)
    }

    func sha256(ofFile path: String) throws -> String {
        try Spool.contentIdentifier(ofFile: path)
    }

    /// Every connection is cut after 3 MB: each attempt after the first asks the server's offset
    /// (HEAD) and sends only the rest (PATCH). 24 MiB arrive whole, once, with at most 20% more
    /// bytes on the wire than the file holds.
    func testConnectionsCutMidBodyResumeAtTheServersOffset() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try ResumableUploadServer(directory: dir + "/server", cutAfter: 3_000_000)
        let size = 24 << 20
        let digest = try randomFile(dir + "/big.bin", bytes: size, seed: 7)
        let url = "http://127.0.0.1:\(server.port)/files/big"
        let uploader = try Uploader(.init(spool: dir + "/spool", policy: RetryPolicy(maxDelay: .zero, maxAttempts: 100)) { _ in
            DeliveryRequest(method: "PUT", url: url)
        })
        let item = try uploader.submit(file: dir + "/big.bin")
        uploader.start()
        var outcome: Uploader.Outcome?
        for await next in uploader.outcomes {
            outcome = next
            break
        }
        await uploader.stop()
        guard case .delivered(let id, let attempts) = outcome else { return XCTFail("\(String(describing: outcome))") }
        XCTAssertEqual(id, item.id)
        XCTAssertGreaterThanOrEqual(attempts, size / 3_000_000, "every cut costs an attempt")
        XCTAssertEqual(server.completed.map(\.bytes), [size], "one upload, complete")
        XCTAssertEqual(try sha256(ofFile: server.stored("/files/big")), digest, "byte-exact")
        XCTAssertLessThanOrEqual(server.received, size * 12 / 10, "sent in all")
        let statistics = uploader.statistics
        XCTAssertGreaterThanOrEqual(statistics.bytesSent, size)
        XCTAssertLessThanOrEqual(statistics.bytesSent, size * 12 / 10)
        XCTAssertEqual(statistics.inFlight, [])
    }

    /// 20 SIGKILLs of `logbook upload` while it uploads 300 MB, each when the server has read the
    /// next of 20 random byte counts (so each run was killed mid-body, however fast this machine):
    /// every relaunch resumes at the server's offset, the file arrives byte-exact, and the bytes
    /// sent in all are at most 1.2 times its size.
    func testTwentyKillsWhileUploading300MBSendAtMostATenthTwice() throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        let dir = makeTemporaryDirectory(self)
        let size = 300_000_000
        // Read at 150 MB/s at most: the kills below land in bodies, not between them.
        let server = try ResumableUploadServer(directory: dir + "/server", rate: 150_000_000)
        let digest = try randomFile(dir + "/big.bin", bytes: size, seed: 11)
        var generator = SplitMix64(state: 99)
        let kills = 20
        let marks = (0..<kills).map { _ in Int.random(in: 2_000_000..<(size - 2_000_000), using: &generator) }.sorted()
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
        let headers: [(name: String, value: String)] = [("Upload-Draft-Interop-Version", "6"), ("Location", "http://evil.example/u/1")]
        XCTAssertNil(ResumableUpload.location(in: headers, sentTo: "http://127.0.0.1:8080/files/x"))
        XCTAssertEqual(ResumableUpload.location(in: [("Upload-Draft-Interop-Version", "6"), ("Location", "/resumable_upload/abc")],
                                                sentTo: "http://127.0.0.1:8080/files/x?token=1"),
                       "http://127.0.0.1:8080/resumable_upload/abc")
        XCTAssertEqual(ResumableUpload.location(in: [("upload-draft-interop-version", "6"), ("location", "http://127.0.0.1:8080/r/1")],
                                                sentTo: "http://127.0.0.1:8080/files/x"), "http://127.0.0.1:8080/r/1")
        XCTAssertNil(ResumableUpload.location(in: [("Upload-Draft-Interop-Version", "5"), ("Location", "/r/1")], sentTo: "http://127.0.0.1:8080/x"),
                     "another interop version")
        XCTAssertNil(ResumableUpload.location(in: [("Upload-Draft-Interop-Version", "6"), ("Location", "https://127.0.0.1:8080/r/1")],
                                              sentTo: "http://127.0.0.1:8080/x"), "another scheme")
        XCTAssertNil(ResumableUpload.location(in: [("Upload-Draft-Interop-Version", "6"), ("Location", "//evil.example/r/1")],
                                              sentTo: "http://127.0.0.1:8080/x"), "a network-path reference")
    }
}
