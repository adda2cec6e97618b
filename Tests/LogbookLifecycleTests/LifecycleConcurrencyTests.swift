import Foundation
import LogbookLifecycle
import LogbookTestKit
import ServiceLifecycle
import XCTest
@testable import Logbook

import Logging

/// `LogbookService` in process while a worker logs: graceful shutdown of a group, cancellation.
final class LifecycleConcurrencyTests: XCTestCase {
    /// A ServiceGroup with LogbookService first and a worker that logs until its graceful shutdown
    /// and then logs 1000 more records; `triggerGracefulShutdown()`: the group returns, the bundle
    /// is closed, and the archive holds every record.
    func testGracefulShutdownOfAServiceGroupClosesTheBundleLast() async throws {
        let directory = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: directory + "/app.logbook", capacity: 1 << 20, chunkSize: 16 << 10,
                                   wrapPolicy: .lossless, losslessWaitMilliseconds: 60_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil))
        let worker = Worker(log: try bundle.logger("worker"), drain: 1000)
        let group = ServiceGroup(services: [LogbookService(bundle: bundle), worker], logger: quietLogger())
        let running = Task { try await group.run() }
        while worker.written.withLock({ $0 }) < 3000 { try await Task.sleep(for: .milliseconds(5)) }
        XCTAssertNoThrow(try bundle.flush(), "open while the group runs")
        await group.triggerGracefulShutdown()
        try await running.value

        XCTAssertThrowsError(try bundle.flush()) { XCTAssertTrue(($0 as! LogbookError).isClosed, "\($0)") }
        let written = worker.written.withLock { $0 }
        XCTAssertEqual(bundle.counters.dropped, 0, "\(bundle.counters.drops)")
        XCTAssertEqual(bundle.counters.records, UInt64(written))
        let reader = try LogReader(path: directory + "/app.logbook/archive")
        let numbers = try reader.readAll().map { entry in Int(entry.arguments[0].description)! }
        XCTAssertEqual(numbers.sorted(), Array(0..<written), "every record archived once")
        XCTAssertEqual(reader.issues.map(\.description), [])
        let files = try reader.archiveFiles()
        XCTAssertEqual(files.writingFiles, 0, "the last file was completed")
        XCTAssertGreaterThan(files.files, 1)
    }

    /// Cancellation instead of graceful shutdown (outside a group: the only way `run()` ends):
    /// the bundle is closed and everything logged before is archived; `run()` does not throw.
    func testCancellationClosesTheBundle() async throws {
        let directory = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: directory + "/app.logbook", wrapPolicy: .lossless,
                                   archive: ArchiveOptions(compressionLevel: nil))
        let log = try bundle.logger("app")
        let service = LogbookService(bundle: bundle)
        let running = Task { try await service.run() }
        for index in 0..<2000 { log.info("before \(index) \(String(repeating: "c", count: index % 17))") }
        try await Task.sleep(for: .milliseconds(50))
        XCTAssertNoThrow(try bundle.flush(), "still open: run() waits")
        running.cancel()
        try await running.value
        XCTAssertThrowsError(try bundle.close()) { XCTAssertTrue(($0 as! LogbookError).isClosed, "\($0)") }
        log.info("after close")
        XCTAssertEqual(bundle.counters.drops[.closed], 1, "a record after close is dropped and counted")

        let reader = try LogReader(path: directory + "/app.logbook/archive")
        let entries = try reader.readAll()
        XCTAssertEqual(entries.count, 2000)
        XCTAssertEqual(entries.map(\.message).last, "before 1999 " + String(repeating: "c", count: 1999 % 17))
        XCTAssertEqual(try reader.archiveFiles().writingFiles, 0)
    }

    /// A group cancelled (not shut down gracefully) also closes the bundle.
    func testCancellingTheGroupClosesTheBundle() async throws {
        let directory = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: directory + "/app.logbook", archive: ArchiveOptions())
        let worker = Worker(log: try bundle.logger("worker"), drain: 0)
        let group = ServiceGroup(services: [LogbookService(bundle: bundle), worker], logger: quietLogger())
        let running = Task { try await group.run() }
        while worker.written.withLock({ $0 }) < 500 { try await Task.sleep(for: .milliseconds(5)) }
        running.cancel()
        _ = try? await running.value
        XCTAssertThrowsError(try bundle.flush()) { XCTAssertTrue(($0 as! LogbookError).isClosed, "\($0)") }
        let written = UInt64(worker.written.withLock { $0 })
        let counters = bundle.counters
        // The worker may log a few records between the close and its own cancellation: dropped, counted.
        XCTAssertEqual(counters.records + (counters.drops[.closed] ?? 0), written, "\(counters)")
        let entries = try LogReader(path: directory + "/app.logbook/archive").readAll()
        XCTAssertEqual(UInt64(entries.count), counters.records, "everything written before close is archived")
    }
}
