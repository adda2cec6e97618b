import CLogbook
import CLogbookUpload
import Foundation
import Logbook
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

    init(directory: String, rate: Int? = nil, cutAfter: Int? = nil, holdAfter: Int? = nil) throws {
        if !FileManager.default.isExecutableFile(atPath: Self.executable) {
            let (status, output) = try runProgram("/usr/bin/env", ["swift", "build", "--package-path", repositoryRoot + "/Tests/ResumableUploadServer"])
            guard status == 0 else { throw XCTSkip("the resumable-upload server did not build: \(output.suffix(2000))") }
        }
        self.directory = directory
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = [directory] + (rate.map { ["--rate", String($0)] } ?? []) + (cutAfter.map { ["--cut-after", String($0)] } ?? [])
            + (holdAfter.map { ["--hold-after", String($0)] } ?? [])
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

    /// Lets a server started with `holdAfter` read on.
    func release() { FileManager.default.createFile(atPath: directory + "/release", contents: nil) }

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

    /// Starts `uploader`, waits for its first outcome, and stops it.
    func firstOutcome(of uploader: Uploader) async -> Uploader.Outcome? {
        uploader.start()
        var outcome: Uploader.Outcome?
        for await next in uploader.outcomes {
            outcome = next
            break
        }
        await uploader.stop()
        return outcome
    }

    /// Every connection is cut after 3 MB: each attempt after the first asks the server's offset
    /// (HEAD) and sends only the rest (PATCH). 24 MiB arrive whole, once, with at most 20% more
    /// bytes on the wire than the file holds, and the 9 attempts that each moved it forward do not
    /// exhaust a policy of 4.
    func testConnectionsCutMidBodyResumeAtTheServersOffset() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try ResumableUploadServer(directory: dir + "/server", cutAfter: 3_000_000)
        let size = 24 << 20
        let digest = try randomFile(dir + "/big.bin", bytes: size, seed: 7)
        let url = "http://127.0.0.1:\(server.port)/files/big"
        // At most 4 attempts: each cut leaves the upload further, so none counts against them.
        let uploader = try Uploader(.init(spool: dir + "/spool", policy: RetryPolicy(maxDelay: .zero, maxAttempts: 4)) { _ in
            DeliveryRequest(method: "PUT", url: url)
        })
        let item = try uploader.submit(file: dir + "/big.bin")
        let outcome = await firstOutcome(of: uploader)
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

/// The content checks of the HTTP layer (logbook_content_check.h), byte by byte: every single-byte
/// change of an archive file the check covers is caught, before its last byte; cuts and growth too.
final class ContentCheckTests: XCTestCase {
    /// Checks `bytes` as the transport does (in steps of `step`); nil when they pass.
    func failure(_ bytes: [UInt8], kind: lb_content_check_kind, length: Int? = nil, digest: [UInt8] = [], prefix: [UInt8] = [],
                 file: String? = nil, step: Int = 4096) -> String? {
        var check = lb_content_check()
        let fd = file.map { open($0, O_RDONLY) } ?? -1
        defer { if fd >= 0 { close(fd) } }
        var digestBytes = digest + [UInt8](repeating: 0, count: max(0, 32 - digest.count))
        let initialised = prefix.withUnsafeBytes { p in
            digestBytes.withUnsafeMutableBufferPointer { d in
                lb_content_check_init(&check, Int32(kind.rawValue), UInt64(length ?? bytes.count), d.baseAddress,
                                      p.count > 0 ? p.baseAddress : nil, p.count, fd)
            }
        }
        defer { lb_content_check_free(&check) }
        if initialised != 0 { return String(cString: lb_content_check_reason(&check)) }
        var at = 0
        while at < bytes.count {
            let n = min(step, bytes.count - at)
            let rc = bytes[at..<at + n].withUnsafeBytes { lb_content_check_update(&check, $0.baseAddress, n) }
            if rc != 0 { return String(cString: lb_content_check_reason(&check)) }
            at += n
        }
        return lb_content_check_finish(&check) == 0 ? nil : String(cString: lb_content_check_reason(&check))
    }

    func archive(compressed: Bool) throws -> (path: String, bytes: [UInt8], prefix: [UInt8]) {
        let dir = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: dir + "/app.logbook", capacity: 4 * 65536, chunkSize: 65536,
                                   archive: ArchiveOptions(compressionLevel: compressed ? 1 : nil))
        let log = try bundle.logger("x")
        for i in 0..<3000 { log.info("record \(i) with some text to fill \(Double(i) * 1.5)") }
        try bundle.rollArchive()
        try bundle.close()
        let name = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: dir + "/app.logbook/archive")
            .filter { $0.hasSuffix(compressed ? ".lba.zst" : ".lba") }.sorted().first)
        let path = dir + "/app.logbook/archive/" + name
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        return (path, bytes, Array(bytes[0..<(compressed ? 72 : 64)]))
    }

    func testEveryByteOfAnArchiveFileIsChecked() throws {
        let (path, bytes, prefix) = try archive(compressed: false)
        XCTAssertNil(failure(bytes, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: path))
        XCTAssertNil(failure(bytes, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: path, step: 1), "any split")
        var caught = 0
        for offset in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 3000)) {
            var changed = bytes
            changed[offset] ^= 0x01
            // The header is compared with the one the key was read from, every frame by its CRCs.
            XCTAssertNotNil(failure(changed, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: path), "byte \(offset) of \(bytes.count)")
            caught += 1
        }
        for cut in [1, 8, 80, bytes.count / 2] {
            XCTAssertNotNil(failure(Array(bytes.dropLast(cut)), kind: LB_CONTENT_CHECK_ARCHIVE, length: bytes.count - cut, prefix: prefix, file: path), "cut \(cut)")
        }
        XCTAssertNotNil(failure(bytes + [0, 0, 0, 0, 0, 0, 0, 0], kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: path), "grown")
        XCTAssertGreaterThan(caught, 2000)
    }

    /// A .lba.zst: every byte is checked, its data frames by the CRC-32C of their bytes as stored
    /// (`compressed_crc`); in a file written before that was recorded (the field 0), by what they
    /// decompress to.
    func testEveryByteOfACompressedArchiveFileIsChecked() throws {
        let (path, bytes, prefix) = try archive(compressed: true)
        XCTAssertNil(failure(bytes, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: path, step: 7))
        // The same file as an older archiver wrote it: no compressed_crc, the table's and footer's CRCs made again.
        var old = bytes
        let footer = old.count - 64
        func u64(_ at: Int) -> Int { Int(old[at..<at + 8].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }) }
        func put32(_ value: UInt32, at: Int) { withUnsafeBytes(of: value.littleEndian) { old.replaceSubrange(at..<at + 4, with: $0) } }
        let table = u64(footer + 32), frames = Int(old[footer + 40..<footer + 44].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
        for frame in 0..<frames { put32(0, at: table + frame * 16 + 12) }
        put32(old[table..<footer].withUnsafeBytes { lb_crc32c(0, $0.baseAddress, $0.count) }, at: footer + 44)
        put32(old[footer..<footer + 60].withUnsafeBytes { lb_crc32c(0, $0.baseAddress, $0.count) }, at: footer + 60)
        let oldPath = path + ".old"
        try Data(old).write(to: URL(fileURLWithPath: oldPath))
        XCTAssertNil(failure(old, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: oldPath, step: 4096), "decompressed and checked")
        // What a .lba.zst decompresses to (zstd skips Logbook's skippable frames): the archive file.
        func decompressed(_ content: [UInt8]) throws -> String {
            let file = path + ".probe"
            try Data(content).write(to: URL(fileURLWithPath: file))
            return try runProgram("/usr/bin/env", ["sh", "-c", "zstd -q -d -c '\(file)' | sha256sum"]).output
        }
        let original = try decompressed(bytes)
        for (name, content, file) in [("recorded", bytes, path), ("decompressed", old, oldPath)] {
            var caught = 0, invisible = 0
            for offset in stride(from: 0, to: content.count, by: max(1, content.count / 1500)) {
                var changed = content
                changed[offset] ^= 0x01
                // The tail (table, footer) is read from the file before the first byte: here the
                // file keeps the original, so the streamed bytes must equal it.
                if failure(changed, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: file) != nil {
                    caught += 1
                } else if name == "decompressed" {
                    // Checked by what it decompresses to, a change zstd never reads (a window
                    // size, unused bits) passes, and only such a change.
                    XCTAssertEqual(try decompressed(changed), original, "byte \(offset): passed, and decompresses to other bytes")
                    invisible += 1
                } else {
                    XCTFail("\(name): byte \(offset) of \(content.count) passed")
                }
            }
            XCTAssertGreaterThan(caught, 1000, name)
            XCTAssertLessThan(invisible, 15, name)
            XCTAssertNotNil(failure(Array(content.dropLast(1)), kind: LB_CONTENT_CHECK_ARCHIVE, length: content.count - 1, prefix: prefix, file: file), name)
        }
    }

    func testSHA256AndSize() {
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var hasher = SHA256()
        bytes.withUnsafeBytes { hasher.update($0) }
        let digest = hasher.finish()
        XCTAssertNil(failure(bytes, kind: LB_CONTENT_CHECK_SHA256, digest: digest))
        for offset in [0, 1, 4095, 4096, 50_000, 99_999] {
            var changed = bytes
            changed[offset] &+= 1
            XCTAssertEqual(failure(changed, kind: LB_CONTENT_CHECK_SHA256, digest: digest), "another SHA-256 than its key", "byte \(offset)")
        }
        XCTAssertNotNil(failure(Array(bytes.dropLast()), kind: LB_CONTENT_CHECK_SHA256, length: bytes.count, digest: digest))
        XCTAssertNotNil(failure(bytes + [0], kind: LB_CONTENT_CHECK_SIZE, length: bytes.count))
        XCTAssertNil(failure(bytes, kind: LB_CONTENT_CHECK_SIZE))
    }
}

/// Bodies streamed from the spool: a linked file, progress within an item.
final class StreamingUploadTests: XCTestCase {
    /// A linked file (`submit(file:linking: true)`, the CLI's --link) deleted after its submission
    /// is still delivered whole (the link keeps it); one edited in place in its last byte is given
    /// up, and the server never gets its body whole.
    func testALinkedFileDeletedIsDeliveredAndOneEditedInPlaceNeverArrivesWhole() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let url = server.url("/ok").absoluteString
        let uploader = try Uploader(.init(spool: dir + "/spool", isAllowed: false) { _ in DeliveryRequest(url: url) })
        let deleted = dir + "/deleted.bin", edited = dir + "/edited.bin"
        let content = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try Data(content).write(to: URL(fileURLWithPath: deleted))
        try Data(content.reversed()).write(to: URL(fileURLWithPath: edited))
        let kept = try uploader.submit(file: deleted, linking: true)
        let changed = try uploader.submit(file: edited, linking: true)
        try FileManager.default.removeItem(atPath: deleted)
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: edited))
        try handle.seek(toOffset: UInt64(content.count - 1))
        try handle.write(contentsOf: Data([content[0] &+ 1]))
        try handle.close()
        uploader.isAllowed = true
        uploader.start()
        var seen: [Uploader.Outcome] = []
        for await outcome in uploader.outcomes {
            seen.append(outcome)
            if seen.count == 2 { break }
        }
        await uploader.stop()
        XCTAssertTrue(seen.contains(.delivered(id: kept.id, attempts: 1)), "\(seen)")
        XCTAssertTrue(seen.contains { outcome in
            guard case .gaveUp(changed.id, let reason) = outcome else { return false }
            return reason.hasPrefix("the file changed after it was submitted") && reason.contains("another SHA-256")
        }, "\(seen)")
        XCTAssertEqual(try Array(Data(contentsOf: URL(fileURLWithPath: server.bodies + "/" + kept.id))), content)
        XCTAssertFalse(FileManager.default.fileExists(atPath: server.bodies + "/" + changed.id), "never whole under its key")
        XCTAssertEqual(server.requests().filter { ($0["answer"] as? Int) == 201 }.count, 1)
        // Its owner's file, changed by its owner: given up, not kept (quarantine would hold a link to it).
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/spool/quarantine/\(changed.id).data"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/spool/\(changed.id).data"))
    }

    /// While an item uploads, `statistics.inFlight` says how far it came and at what rate, and
    /// `bytesSent` counts what was sent.
    func testProgressWithinAnItem() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try ResumableUploadServer(directory: dir + "/server", rate: 4_000_000)
        let size = 16 << 20
        try Data((0..<size).map { UInt8(truncatingIfNeeded: $0) }).write(to: URL(fileURLWithPath: dir + "/f.bin"))
        let url = "http://127.0.0.1:\(server.port)/files/f"
        let uploader = try Uploader(.init(spool: dir + "/spool") { _ in DeliveryRequest(url: url) })
        let item = try uploader.submit(file: dir + "/f.bin")
        uploader.start()
        var samples: [Uploader.Transfer] = []
        let progressed = await eventually {
            if let transfer = uploader.statistics.inFlight.first { samples.append(transfer) }
            return (samples.last?.bytesDone ?? 0) >= 4 << 20
        }
        XCTAssertTrue(progressed, "progress within the item")
        for await outcome in uploader.outcomes {
            XCTAssertEqual(outcome, .delivered(id: item.id, attempts: 1))
            break
        }
        await uploader.stop()
        XCTAssertTrue(samples.allSatisfy { $0.id == item.id && $0.byteCount == size && $0.bytesDone <= size })
        XCTAssertEqual(samples.map(\.bytesDone), samples.map(\.bytesDone).sorted(), "it only grows")
        XCTAssertGreaterThan(samples.last?.bytesPerSecond ?? 0, 0)
        XCTAssertGreaterThanOrEqual(uploader.statistics.bytesSent, size)
        XCTAssertEqual(uploader.statistics.inFlight, [])
    }

    /// A task cancelled while its exchange waits on a server that never answers ends with
    /// ECANCELED (not the 60 s timeout), and the interim 104 of a resumable server reaches its
    /// handler before the final answer.
    func testAnExchangeIsCancelledAtOnceAndInterimAnswersAreHandedOver() async throws {
        let dir = makeTemporaryDirectory(self)
        let plain = try UploadServer(directory: dir)
        let transport = HTTPTransport()
        let stallURL = plain.url("/stall/x").absoluteString
        let stalled = Task {
            await transport.send(DeliveryRequest(method: "PUT", url: stallURL), body: .bytes([1, 2, 3]), timeout: .seconds(60))
        }
        let arrived = await eventually { plain.arrivals() == 1 }
        XCTAssertTrue(arrived)
        stalled.cancel()
        guard case .failure(let failure) = await stalled.value else { return XCTFail("an answer from a stalled server") }
        XCTAssertEqual(failure.code, ECANCELED, failure.words)

        let resumable = try ResumableUploadServer(directory: dir + "/server")
        let interims = Locked<[(Int, String?)]>([])
        var request = DeliveryRequest(method: "POST", url: "http://127.0.0.1:\(resumable.port)/files/y")
        request.setHeader("Upload-Draft-Interop-Version", "6")
        request.setHeader("Upload-Complete", "?1")
        let answer = await transport.send(request, body: .bytes(Array(repeating: 9, count: 100_000)), timeout: .seconds(60)) { status, headers in
            interims.withLock { $0.append((status, headers.first { $0.name.lowercased() == "location" }?.value)) }
        }
        guard case .success(let final) = answer else { return XCTFail("\(answer)") }
        XCTAssertEqual(final.status, 201)
        let seen = interims.withLock { $0 }
        XCTAssertEqual(seen.map(\.0), [104])
        XCTAssertTrue(seen.first?.1?.hasPrefix("http://127.0.0.1:\(resumable.port)/resumable_upload/") == true, "\(seen)")
        XCTAssertEqual(resumable.completed.map(\.bytes), [100_000])
    }
}
