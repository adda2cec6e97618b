import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookExport
import LogbookTesting
import LogbookUpload

/// The exporter from its cursor while the collector fails, and a backlog read as it is sent.
final class ExporterConcurrencyTests: XCTestCase {
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
}
