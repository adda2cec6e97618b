import CLogbook
import Foundation
import LogbookTestKit
import XCTest
import Logbook
import Logging
import LogbookExport
import LogbookMetrics
import LogbookUpload
import Metrics
import MetricsTestKit
import ServiceLifecycle

/// Metrics polled while the archiver, an exporter and the poller run.
final class MetricsConcurrencyTests: XCTestCase {
    /// Archive lag, files and totals from a real archiver; after close the archive metrics keep
    /// their last values and a poll does not fail.
    ///
    /// The directory's numbers are polled right after the roll returns: a roll returns once its
    /// file is compressed and announced, and the compression thread publishes the directory's
    /// numbers (files, bytes, files waiting for compression) before it announces. Before, only the
    /// archiver thread published them, when it next ran: polled at once, they could still describe
    /// the rolled `.lba` (12,744 bytes) in place of its `.lba.zst` (2,489 bytes), as a run on a
    /// loaded machine saw (87 of 100 runs on a busy machine).
    func testArchiveMetricsFollowTheArchiver() throws {
        let dir = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: dir + "/app.logbook", capacity: 32 * 4096, chunkSize: 4096,
                                   archive: ArchiveOptions(directory: dir + "/archive"))
        let metrics = TestMetrics()
        let reporter = LogbookMetricsReporter(bundle: bundle, factory: metrics)
        let log = try bundle.logger("app")
        for i in 0..<300 { log.info("record \(i) for the archive") }
        try bundle.syncArchive()
        try bundle.rollArchive()
        XCTAssertEqual(bundle.archiveStats?.compressionPending, 0, "the roll's file is compressed when the roll returns")
        reporter.poll()
        let stats = try XCTUnwrap(bundle.archiveStats)
        XCTAssertEqual(stats.filesCompressed, 1)
        XCTAssertEqual(try counter(metrics, "logbook_archive_files_compressed_total"), 1)
        XCTAssertEqual(try gauge(metrics, "logbook_archive_compression_pending_files"), 0)
        XCTAssertEqual(try gauge(metrics, "logbook_archive_directory_bytes"), Double(try bytesOnDisk(dir + "/archive")),
                       "what the directory holds: the .lba.zst")
        XCTAssertGreaterThan(stats.chunksArchived, 1)
        XCTAssertEqual(try counter(metrics, "logbook_archive_chunks_total"), Int64(stats.chunksArchived))
        XCTAssertEqual(try counter(metrics, "logbook_archive_chunks_total"), Int64(bundle.counters.chunksClaimed))
        XCTAssertEqual(try counter(metrics, "logbook_archive_bytes_total"), Int64(stats.bytesArchived))
        XCTAssertEqual(try counter(metrics, "logbook_archive_files_rolled_total"), 1)
        XCTAssertEqual(try counter(metrics, "logbook_archive_failures_total"), 0)
        XCTAssertEqual(try gauge(metrics, "logbook_archive_files"), 1)
        XCTAssertEqual(try gauge(metrics, "logbook_archive_directory_bytes"), Double(stats.directoryBytes))
        XCTAssertEqual(try gauge(metrics, "logbook_archive_lag_chunks"), 0)
        XCTAssertEqual(try gauge(metrics, "logbook_archive_lag_bytes"), 0)
        XCTAssertEqual(try gauge(metrics, "logbook_archive_last_error"), 0)
        XCTAssertEqual(try gauge(metrics, "logbook_ring_chunks", [("state", "archived")]), Double(stats.chunksArchived))
        log.info("one more \(1)")
        try bundle.rollArchive()
        reporter.poll()
        XCTAssertEqual(try counter(metrics, "logbook_archive_files_rolled_total"), 2)
        XCTAssertEqual(try gauge(metrics, "logbook_archive_files"), 2)
        try bundle.close()
        XCTAssertNil(bundle.archiveStats)
        reporter.poll()
        XCTAssertEqual(try gauge(metrics, "logbook_archive_files"), 2, "kept after close")
        XCTAssertEqual(try counter(metrics, "logbook_archive_files_rolled_total"), 2)
    }

    /// The bytes of the files in `directory`.
    func bytesOnDisk(_ directory: String) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: directory).map {
            (try FileManager.default.attributesOfItem(atPath: directory + "/" + $0)[.size] as! NSNumber).intValue
        }.reduce(0, +)
    }

    /// The queue while a pass is under way: what the pass found, less the batches settled.
    func testExporterPendingRecordsDuringAPass() async throws {
        try requireOTLPDefinitions()
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        try makeBundle(dir, records: 250)
        // The collector holds the first batch until the test has seen the queue.
        let exporter = try Exporter(.init(source: dir + "/app.logbook", destinationName: "held", cursors: dir + "/cursors",
                                          maximumBatchRecords: 100),
                                    otlp: OTLPDestination(url: server.url("/hold/v1/logs")),
                                    encoding: OTLPLogsEncoding(serviceName: "test"))
        let monitor = exporter.monitor
        let pass = Task { try await exporter.exportAvailable().exported }
        var seen: Set<Int> = []
        let held = await eventually { server.requests().count == 3 }  // 3 batches, all in flight, all held
        XCTAssertTrue(held, "the first batch never reached the collector")
        seen.insert(monitor.statistics.pending)
        XCTAssertTrue(FileManager.default.createFile(atPath: server.log + ".release", contents: nil))
        _ = await eventually {
            let pending = monitor.statistics.pending
            if pending > 0 { seen.insert(pending) }
            return monitor.statistics.passes == 1
        }
        let exported = try await pass.value
        XCTAssertEqual(exported, 250)
        XCTAssertEqual(seen.sorted(by: >).first, 250, "the queue while the first batch was held: what the pass found")
        XCTAssertTrue(seen.isSubset(of: [250, 150, 50]), "\(seen)")
        XCTAssertEqual(monitor.statistics.pending, 0)
    }

    /// `run()` polls at once and then every interval, and returns (after a last poll) when its
    /// task is cancelled.
    func testRunPollsUntilCancelled() async throws {
        let path = makeTemporaryDirectory(self) + "/app.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let metrics = TestMetrics()
        let reporter = LogbookMetricsReporter(bundle: bundle, interval: .milliseconds(20), factory: metrics)
        XCTAssertEqual(reporter.interval, .milliseconds(20))
        let log = try bundle.logger("app")
        let running = Task { await reporter.run() }
        let gauge = try metrics.expectGauge("logbook_ring_capacity_bytes")
        let polled = await eventually { gauge.values.count >= 3 }
        XCTAssertTrue(polled, "polled repeatedly")
        for i in 0..<42 { log.info("record \(i)") }
        running.cancel()
        await running.value
        XCTAssertEqual(try counter(metrics, "logbook_records_total"), 42, "the last poll counted everything")
        let polls = gauge.values.count
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(gauge.values.count, polls, "no poll after run() returned")
        try bundle.close()
    }
}
