import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookExport
import LogbookTesting
import LogbookUpload

/// The exporter: every record reaches the collector once, across
/// faults, a second exporter resuming from the cursor, and records written after the first pass.
/// Those of its tests that CI also runs under ThreadSanitizer are in `ExporterConcurrencyTests`.
final class ExporterTests: XCTestCase {
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
