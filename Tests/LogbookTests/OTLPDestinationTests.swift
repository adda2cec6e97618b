import Foundation
import XCTest
import Logbook
import LogbookExport
import LogbookTesting
import LogbookUpload

/// OTLP/HTTP delivery against Tests/Servers/otlp_server.py on
/// 127.0.0.1, which parses every body with opentelemetry-proto: 503 with Retry-After, 429 and a
/// reset are retried, 400 and 500 are not (reported with the server's message), a partial success
/// is counted, not retried.
final class OTLPDestinationTests: XCTestCase {
    func server() throws -> UploadServer {
        try requireOTLPDefinitions()
        return try UploadServer(directory: makeTemporaryDirectory(self), script: "otlp_server.py")
    }

    func body() throws -> [UInt8] {
        let capture = try LogCapture()
        let log = try capture.logger("net")
        for i in 0..<5 { log.info("request \(i) done", metadata: ["status": 200]) }
        return OTLPLogsEncoding(serviceName: "test").encode(try capture.entries(), observedNanoseconds: 1)  // protobuf, as the destination says
    }

    let quick = RetryPolicy(retryableStatuses: [429, 502, 503, 504], baseDelay: .milliseconds(20), maxDelay: .milliseconds(100))

    func testRetriedFaultsEndDelivered() async throws {
        let server = try server()
        // A timeout no attempt meets on a loaded machine: one that did would add an attempt.
        let destination = OTLPDestination(url: server.url("/s/503ra1,429,reset,502/v1/logs"), policy: quick, timeout: .seconds(120))
        let start = Date()
        let delivery = await destination.deliver(try body())
        XCTAssertEqual(delivery, .delivered(attempts: 5, rejected: 0, message: nil))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 1.0, "Retry-After: 1 honoured")
        let requests = server.requests()
        XCTAssertEqual(requests.map { $0["answer"] as? String }, ["503ra1", "429", "reset", "502", "ok"])
        XCTAssertEqual(requests.map { $0["attempt"] as? String }, ["1", "2", "3", "4", "5"])
        let last = try XCTUnwrap(requests.last)
        XCTAssertEqual(last["parsed"] as? Bool, true)
        XCTAssertEqual((last["records"] as? [Any])?.count, 5)
    }

    func testNotRetriedStatusesAreReportedWithTheServersMessage() async throws {
        let server = try server()
        let bad = await OTLPDestination(url: server.url("/s/400/v1/logs"), policy: quick).deliver(try body())
        XCTAssertEqual(bad, .gaveUp(attempts: 1, reason: "HTTP 400: attribute key too long"))
        let serverError = await OTLPDestination(url: server.url("/s/500/v1/logs"), policy: quick).deliver(try body())
        XCTAssertEqual(serverError, .gaveUp(attempts: 1, reason: "HTTP 500"), "OTLP does not retry 500")
        XCTAssertEqual(server.requests().count, 2)
    }

    func testAPartialSuccessIsCountedNotRetried() async throws {
        let server = try server()
        let delivery = await OTLPDestination(url: server.url("/s/partial3/v1/logs"), policy: quick).deliver(try body())
        XCTAssertEqual(delivery, .delivered(attempts: 1, rejected: 3, message: "too old"))
        XCTAssertEqual(server.requests().count, 1)
    }

    func testGzippedBodies() async throws {
        let server = try server()
        let plain = try body()
        let delivery = await OTLPDestination(url: server.url("/v1/logs"), policy: quick, gzipLevel: 6).deliver(plain)
        XCTAssertEqual(delivery, .delivered(attempts: 1, rejected: 0, message: nil))
        let request = try XCTUnwrap(server.requests().first)
        XCTAssertEqual(request["encoding"] as? String, "gzip")
        XCTAssertEqual(request["parsed"] as? Bool, true)
        XCTAssertEqual((request["records"] as? [Any])?.count, 5)
        XCTAssertLessThan(try XCTUnwrap(request["bytes"] as? Int), plain.count / 3, "gzip makes the JSON much smaller")
    }

    /// zstd bodies (`Content-Encoding: zstd`), decompressed by the collector through libzstd, and
    /// the `logbook export --zstd` that sends them: every record arrives, with its values.
    func testZstdBodies() async throws {
        let server = try server()
        let plain = try body()
        let delivery = await OTLPDestination(url: server.url("/v1/logs"), policy: quick, compression: .zstd(level: 1)).deliver(plain)
        XCTAssertEqual(delivery, .delivered(attempts: 1, rejected: 0, message: nil))
        let request = try XCTUnwrap(server.requests().first)
        XCTAssertEqual(request["encoding"] as? String, "zstd")
        XCTAssertEqual(request["parsed"] as? Bool, true)
        XCTAssertEqual((request["records"] as? [Any])?.count, 5)
        XCTAssertLessThan(try XCTUnwrap(request["bytes"] as? Int), plain.count / 3, "zstd makes the JSON much smaller")

        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let source = try makeBundle(dir, records: 700)
        let run = try runProgram(logbook, ["export", "--otlp", server.url("/cli/v1/logs").absoluteString, "--zstd", "--batch", "200",
                                           "--cursors", dir + "/cursors", source])
        XCTAssertEqual(run.status, 0, run.output)
        XCTAssertTrue(run.output.contains("exported 700 records"), run.output)
        let sent = server.requests().dropFirst()
        XCTAssertEqual(sent.count, 4)
        XCTAssertTrue(sent.allSatisfy { $0["encoding"] as? String == "zstd" && $0["parsed"] as? Bool == true }, "\(sent)")
        let bodies = sent.flatMap { ($0["records"] as? [[String: Any]]) ?? [] }.compactMap { $0["body"] as? String }
        XCTAssertEqual(bodies.count, 700)
        XCTAssertEqual(Set(bodies).count, 700)
        let both = try runProgram(logbook, ["export", "--otlp", server.url("/v1/logs").absoluteString, "--zstd", "--gzip", source])
        XCTAssertNotEqual(both.status, 0)
        XCTAssertTrue(both.output.contains("give one of --gzip and --zstd"), both.output)
    }

    func testABodyTheCollectorCannotParseIsNotRetried() async throws {
        let server = try server()
        let delivery = await OTLPDestination(url: server.url("/v1/logs"), policy: quick).deliver(Array("{\"resourceLogs\":[{\"nope\":1}]}".utf8))
        guard case .gaveUp(1, let reason) = delivery else { return XCTFail("\(delivery)") }
        XCTAssertTrue(reason.hasPrefix("HTTP 400: not an ExportLogsServiceRequest"), reason)
    }
}

/// The exporter: every record reaches the collector once, across
/// faults, a second exporter resuming from the cursor, and records written after the first pass.
final class ExporterTests: XCTestCase {
    func testEveryRecordOnceFromTheCursor() async throws {
        try requireOTLPDefinitions()
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        let bundle = try LogBundle(path: dir + "/app.logbook")
        let log = try bundle.logger("app")
        for i in 0..<1000 { log.info("record \(i) of the first pass", metadata: ["i": .init(i)]) }
        try bundle.flush()
        let quick = RetryPolicy(retryableStatuses: [429, 502, 503, 504], baseDelay: .milliseconds(20), maxDelay: .milliseconds(100))
        func exporter() throws -> Exporter {
            try Exporter(.init(source: dir + "/app.logbook", destinationName: "collector", cursors: dir + "/cursors",
                               maximumBatchRecords: 300),
                         otlp: OTLPDestination(url: server.url("/s/503ra0,ok,reset,ok,429/v1/logs"), policy: quick),
                         encoding: OTLPLogsEncoding(serviceName: "test"))
        }
        var first: Exporter? = try exporter()
        let report = try await first!.exportAvailable()
        XCTAssertEqual(report.exported, 1000)
        XCTAssertEqual(report.gaveUp, [])
        XCTAssertThrowsError(try exporter(), "the cursor is taken while the first exporter lives") { error in
            XCTAssertEqual((error as? LogbookError)?.errno, EWOULDBLOCK, "\(error)")
        }
        first = nil
        let second = try exporter()
        let resumed = try await second.exportAvailable()
        XCTAssertEqual(resumed.exported, 0, "a new exporter resumes from the cursor")
        for i in 0..<10 { log.info("record \(i) of the second pass", metadata: ["i": .init(i)]) }
        try bundle.flush()
        let again = try await second.exportAvailable()
        XCTAssertEqual(again.exported, 10)
        let delivered = server.requests().filter { ($0["answer"] as? String) == "ok" }
        let bodies = delivered.flatMap { ($0["records"] as? [[String: Any]]) ?? [] }.compactMap { $0["body"] as? String }
        XCTAssertEqual(bodies.count, 1010)
        XCTAssertEqual(Set(bodies).count, 1010, "each record once")
        try bundle.close()
    }

    /// A backlog far larger than what the exporter may hold: it reads as it sends, so the records
    /// it holds decoded at once (``Exporter/Statistics/peakPending``) stay within its bound,
    /// (2 × requests in flight + 3) × batch, while every record of every size arrives once, with
    /// its values. The collector is slower than the reader (each answer waits 5 ms), so a reader
    /// that ran ahead unbounded would hold the backlog.
    func testABacklogIsReadAsItIsSentInBoundedMemory() async throws {
        try requireOTLPDefinitions()
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        let sizes = [0, 30, 500, 3000, 9000]  // past the 4 KiB chunk: stored as fragments
        @Sendable func text(_ thread: Int, _ i: Int) -> String {
            "record \(thread)-\(i) " + String(repeating: "b", count: sizes[(i * 7 + thread) % sizes.count])
        }
        let bundle = try LogBundle(path: dir + "/app.logbook", capacity: 64 << 20, chunkSize: 4096)
        let log = try bundle.logger("app")
        let total = 4000
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for i in 0..<(total / 4) { log.info("\(text(thread, i))", metadata: ["n": .init(i)]) }
        }
        try bundle.close()
        let batch = 40, inFlight = 2
        let exporter = try Exporter(.init(source: dir + "/app.logbook", destinationName: "collector", cursors: dir + "/cursors",
                                          maximumBatchRecords: batch, requestsInFlight: inFlight),
                                    otlp: OTLPDestination(url: server.url("/slow/5/v1/logs")),
                                    encoding: OTLPLogsEncoding(serviceName: "test"))
        let report = try await exporter.exportAvailable()
        XCTAssertEqual(report.exported, total)
        XCTAssertEqual(report.issues, [])
        let statistics = exporter.statistics
        XCTAssertGreaterThan(statistics.peakPending, 0)
        XCTAssertLessThanOrEqual(statistics.peakPending, (2 * inFlight + 3) * batch, "held at most the bound, not the backlog of \(total)")
        XCTAssertEqual(statistics.pending, 0)
        let bodies = server.requests().filter { ($0["answer"] as? String)?.hasPrefix("slow") == true }
            .flatMap { ($0["records"] as? [[String: Any]]) ?? [] }.compactMap { $0["body"] as? String }
        XCTAssertEqual(bodies.count, total)
        XCTAssertEqual(Set(bodies), Set((0..<4).flatMap { thread in (0..<(total / 4)).map { text(thread, $0) } }), "each record once, with its values")
    }

    /// The cursor's marks stay bounded by what the source holds (retention deletes archive files
    /// while the export goes on), every record of records of every size is exported once, and a
    /// bundle made again at the same path starts the cursor over instead of hiding its records.
    func testMarksStayBoundedAndABundleMadeAgainStartsOver() async throws {
        try requireOTLPDefinitions()
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        func exporter() throws -> Exporter {
            try Exporter(.init(source: dir + "/app.logbook", destinationName: "collector", cursors: dir + "/cursors",
                               maximumBatchRecords: 100, maximumMarks: 16),
                         otlp: OTLPDestination(url: server.url("/v1/logs")), encoding: OTLPLogsEncoding(serviceName: "test"))
        }
        var bundle = try LogBundle(path: dir + "/app.logbook", capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: 3, quota: nil))
        var log = try bundle.logger("app")
        var first: Exporter! = try exporter()
        var generator = SystemRandomNumberGenerator()
        var written: [String] = []
        var largestMarks = 0
        var chunksWritten: UInt64 = 0
        for round in 0..<30 {
            for i in 0..<40 {
                let padding = String(repeating: "p", count: [0, 10, 300, 3900][Int.random(in: 0..<4, using: &generator)])
                let text = "round \(round) record \(i) \(padding)"
                log.info("\(text)", metadata: ["round": .init(round)])
                written.append(text)
            }
            try bundle.flush()
            let report = try await first.exportAvailable()
            XCTAssertEqual(report.gaveUp, [])
            // the chunks the source holds now (ring and the files retention kept)
            let held = Set(try LogReader(path: dir + "/app.logbook").readAll().map(\.chunkSequence)).count
            XCTAssertLessThanOrEqual(first.savedCursor.marks.count, 2 * held + 16, "round \(round)")
            largestMarks = max(largestMarks, first.savedCursor.marks.count)
            chunksWritten = max(chunksWritten, first.savedCursor.marks.keys.max() ?? 0)  // sequences count from 1
        }
        func bodies() -> [String] {
            server.requests().filter { ($0["answer"] as? String) == "ok" }
                .flatMap { ($0["records"] as? [[String: Any]]) ?? [] }.compactMap { $0["body"] as? String }
        }
        // each once; not necessarily in order: a chunk the archiver moves out of the ring while a
        // pass reads can be read by the next pass
        let delivered = bodies()
        XCTAssertEqual(delivered.count, written.count, "each once")
        XCTAssertTrue(delivered.sorted() == written.sorted(),
                      "every record with its value; missing \(Set(written).subtracting(delivered).map { $0.prefix(24) })")
        XCTAssertGreaterThan(chunksWritten, UInt64(2 * largestMarks), "without forgetting, a mark per chunk written")
        XCTAssertGreaterThan(first.savedCursor.lowWatermark, 1, "marks of deleted files dropped")
        try bundle.close()
        first = nil  // lets the cursor go

        // the same path, another bundle: its chunk sequences start at 1 again
        try FileManager.default.removeItem(atPath: dir + "/app.logbook")
        bundle = try LogBundle(path: dir + "/app.logbook")
        log = try bundle.logger("app")
        for i in 0..<50 { log.info("new bundle record \(i)") }
        try bundle.close()
        var next: Exporter? = try exporter()
        let again = try await next!.exportAvailable()
        next = nil
        XCTAssertTrue(again.startedOver)
        XCTAssertEqual(again.exported, 50)
        XCTAssertEqual(bodies().suffix(50), (0..<50).map { "new bundle record \($0)" })
        let none = try await exporter().exportAvailable()
        XCTAssertFalse(none.startedOver)
        XCTAssertEqual(none.exported, 0)
    }

    /// `logbook export --otlp` (one pass): everything once, then nothing on a second run (the cursor).
    func testTheCommand() throws {
        try requireOTLPDefinitions()
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        try makeBundle(dir, records: 100)
        let arguments = ["export", "--otlp", server.url("/s/503ra0/v1/logs").absoluteString, "--cursors", dir + "/cursors",
                         "--batch", "40", dir + "/app.logbook"]
        let first = try runProgram(logbook, arguments)
        XCTAssertEqual(first.status, 0, first.output)
        XCTAssertTrue(first.output.contains("exported 100 records"), first.output)
        let second = try runProgram(logbook, arguments)
        XCTAssertTrue(second.output.contains("exported 0 records"), second.output)
        let bodies = server.requests().filter { ($0["answer"] as? String) == "ok" }
            .flatMap { ($0["records"] as? [[String: Any]]) ?? [] }.compactMap { $0["body"] as? String }
        XCTAssertEqual(bodies.count, 100)
        XCTAssertEqual(Set(bodies).count, 100)
    }

    /// 20 SIGKILLs of `logbook export` in the middle of its batches (4 requests in flight): every
    /// record reaches the collector, and what arrives twice is bounded by the batches in flight at
    /// the kills.
    func testAKillLoopLosesNothing() throws {
        try requireOTLPDefinitions()
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        let total = 3000, batch = 50
        // records from a few bytes to past the 4 KiB chunk (stored as fragments), two threads
        let sizes = [0, 40, 700, 3000, 9000]
        @Sendable func text(_ thread: Int, _ i: Int) -> String { "record \(thread)-\(i) " + String(repeating: "k", count: sizes[(i * 3 + thread) % sizes.count]) }
        let bundle = try LogBundle(path: dir + "/app.logbook", capacity: 32 << 20, chunkSize: 4096)  // holds them all
        let log = try bundle.logger("app")
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            for i in 0..<(total / 2) { log.info("\(text(thread, i))") }
        }
        try bundle.close()
        let arguments = ["export", "--otlp", server.url("/slow/20/v1/logs").absoluteString, "--cursors", dir + "/cursors",
                         "--batch", String(batch), dir + "/app.logbook"]
        var generator = SystemRandomNumberGenerator()
        var kills = 0
        for _ in 0..<20 {
            let process = try launch(logbook, arguments)
            usleep(UInt32.random(in: 50_000...250_000, using: &generator))
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                kills += 1
            }
            process.waitUntilExit()
        }
        let last = try runProgram(logbook, arguments)
        XCTAssertEqual(last.status, 0, last.output)
        let bodies = server.requests().filter { ($0["answer"] as? String)?.hasPrefix("slow") == true }
            .flatMap { ($0["records"] as? [[String: Any]]) ?? [] }.compactMap { $0["body"] as? String }
        XCTAssertEqual(Set(bodies).count, total, "every record arrived (\(kills) kills)")
        XCTAssertTrue(Set(bodies) == Set((0..<2).flatMap { thread in (0..<(total / 2)).map { text(thread, $0) } }), "with their values")
        XCTAssertLessThanOrEqual(bodies.count - total, kills * batch * 4, "repeats bounded by the 4 batches in flight at each kill")
    }

    /// `logbook export --follow` exports a live writer's records as they come, through a small
    /// lossless ring whose chunks roll into archive files meanwhile (three threads, records up to
    /// past the chunk size), and stops on SIGTERM.
    func testFollowingALiveWriter() throws {
        try requireOTLPDefinitions()
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        let bundle = try LogBundle(path: dir + "/live.logbook", capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil))
        let log = try bundle.logger("live")
        log.info("before the follower")
        try bundle.flush()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: logbook)
        process.arguments = ["export", "--otlp", server.url("/v1/logs").absoluteString, "--cursors", dir + "/cursors",
                             "--follow", "--interval", "0.1", dir + "/live.logbook"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // three threads, records from a few bytes to past the chunk size (stored as fragments)
        let total = 4500
        let sizes = [0, 40, 700, 3000, 5000]
        let threads = (0..<3).map { thread in
            Thread {
                for i in 0..<(total / 3) {
                    let padding = String(repeating: "v", count: sizes[(i * 7 + thread) % sizes.count])
                    log.info("live record \(thread)-\(i) \(padding)", metadata: ["thread": .init(thread)])
                    if i % 300 == 0 { usleep(50_000) }
                }
            }
        }
        threads.forEach { $0.start() }
        while threads.contains(where: \.isExecuting) || threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
        try bundle.flush()
        try bundle.syncArchive()
        XCTAssertGreaterThan(try FileManager.default.contentsOfDirectory(atPath: dir + "/live.logbook/archive").count, 2,
                             "files rolled while following")
        func delivered() -> [String] {
            server.requests().filter { ($0["answer"] as? String) == "ok" }
                .flatMap { ($0["records"] as? [[String: Any]]) ?? [] }.compactMap { $0["body"] as? String }
        }
        // Everything delivered (two minutes is a failsafe: the counts below then say what is missing).
        _ = waitUntil { Set(delivered()).count >= total + 1 }
        process.terminate()  // SIGTERM: ends after the pass under way
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        let bodies = delivered()
        XCTAssertEqual(bodies.count, total + 1, "each once")
        var expected: Set<String> = ["before the follower"]
        for thread in 0..<3 {
            for i in 0..<(total / 3) { expected.insert("live record \(thread)-\(i) " + String(repeating: "v", count: sizes[(i * 7 + thread) % sizes.count])) }
        }
        XCTAssertTrue(Set(bodies) == expected, "with their values: missing \(expected.subtracting(bodies).map { $0.prefix(40) }), "
                       + "unexpected \(Set(bodies).subtracting(expected).map { $0.prefix(40) })")
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(said.contains("exported \(total + 1) records"), said)
        try bundle.close()
    }
}
