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

/// A counter's total (`MetricsTests`, `MetricsConcurrencyTests`).
func counter(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)] = []) throws -> Int64 {
    try metrics.expectCounter(label, dimensions).totalValue
}

/// A gauge's last value.
func gauge(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)] = []) throws -> Double? {
    try metrics.expectGauge(label, dimensions).lastValue
}

/// `LogbookMetricsReporter` against swift-metrics' `TestMetrics` (passed as the factory: no global
/// bootstrap, so every test has its own metrics).
/// Those of its tests that CI also runs under ThreadSanitizer are in `MetricsConcurrencyTests`.
final class MetricsTests: XCTestCase {
    func testRecordsAndBytesCountFromTheReportersCreation() throws {
        let path = makeTemporaryDirectory(self) + "/app.logbook"
        // No idle sealing: a pause of a second (a loaded machine) would seal the chunk, and the
        // next record would claim another one.
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10, idleSealMilliseconds: 0)
        let log = try bundle.logger("app")
        for i in 0..<7 { log.info("before the reporter \(i)") }
        let metrics = TestMetrics()
        let reporter = LogbookMetricsReporter(bundle: bundle, factory: metrics)
        XCTAssertEqual(try counter(metrics, "logbook_records_total"), 0, "nothing reported before the first poll")
        XCTAssertNil(try gauge(metrics, "logbook_ring_bytes_in_use"))
        let bytesBefore = bundle.counters.bytes
        for i in 0..<100 { log.info("record \(i) of \(100)") }
        reporter.poll()
        XCTAssertEqual(try counter(metrics, "logbook_records_total"), 100)
        XCTAssertEqual(try counter(metrics, "logbook_record_bytes_total"), Int64(bundle.counters.bytes - bytesBefore))
        XCTAssertEqual(try counter(metrics, "logbook_chunks_claimed_total"), 0, "the chunk of the first 7 records still has room")
        // A poll adds only what is new.
        reporter.poll()
        XCTAssertEqual(try metrics.expectCounter("logbook_records_total").values, [100])
        for i in 0..<25 { log.info("more \(i)") }
        reporter.poll()
        XCTAssertEqual(try metrics.expectCounter("logbook_records_total").values, [100, 25])
        XCTAssertEqual(try counter(metrics, "logbook_dropped_records_total", [("reason", "too_large")]), 0)
        try bundle.close()
    }

    func testDropsAreOneCounterWithTheReasonAsDimension() throws {
        let path = makeTemporaryDirectory(self) + "/drops.logbook"
        let bundle = try LogBundle(path: path, capacity: 4 << 20, chunkSize: 16 << 10)
        let metrics = TestMetrics()
        let reporter = LogbookMetricsReporter(bundle: bundle, factory: metrics)
        let reasons = metrics.counters(label: "logbook_dropped_records_total")
            .compactMap { $0.dimensions.first { $0.0 == "reason" }?.1 }
        XCTAssertEqual(Set(reasons), ["too_large", "no_chunk", "reentrant", "closed", "meta", "ring_full"])
        let log = try bundle.logger("app")
        let huge = [UInt8](repeating: 1, count: Int(LB_RECORD_MAX_SIZE) + 1)
        log.info("huge \(huge)")
        log.info("huge again \(huge)")
        log.info("fine \(1)")
        reporter.poll()
        XCTAssertEqual(try counter(metrics, "logbook_dropped_records_total", [("reason", "too_large")]), 2)
        XCTAssertEqual(try counter(metrics, "logbook_records_total"), 1)
        try bundle.close()
        for i in 0..<3 { log.info("after close \(i)") }
        reporter.poll()
        XCTAssertEqual(try counter(metrics, "logbook_dropped_records_total", [("reason", "closed")]), 3,
                       "counters stay readable after close")
        XCTAssertEqual(try counter(metrics, "logbook_dropped_records_total", [("reason", "too_large")]), 2)
        XCTAssertEqual(try counter(metrics, "logbook_dropped_records_total", [("reason", "ring_full")]), 0)
    }

    /// A lossless ring without an archiver keeps its first records and drops the rest as
    /// `ring_full`; the ring gauges show it full.
    func testAFullLosslessRingReportsRingFullAndNoFreeChunk() throws {
        let path = makeTemporaryDirectory(self) + "/lossless.logbook"
        let bundle = try LogBundle(path: path, capacity: 8 * 4096, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 0)
        let metrics = TestMetrics()
        let reporter = LogbookMetricsReporter(bundle: bundle, factory: metrics)
        let log = try bundle.logger("app")
        for i in 0..<5000 { log.info("record \(i)") }
        try bundle.flush()
        reporter.poll()
        let counters = bundle.counters
        let ringFull = try counter(metrics, "logbook_dropped_records_total", [("reason", "ring_full")])
        XCTAssertGreaterThan(ringFull, 0)
        XCTAssertEqual(ringFull, Int64(counters.drops[.ringFull]!))
        XCTAssertEqual(try counter(metrics, "logbook_records_total") + ringFull, 5000)
        XCTAssertEqual(try gauge(metrics, "logbook_ring_capacity_bytes"), Double(8 * 4096))
        XCTAssertEqual(try gauge(metrics, "logbook_ring_chunks", [("state", "free")]), 0)
        XCTAssertEqual(try gauge(metrics, "logbook_ring_chunks", [("state", "sealed")]), 8)
        XCTAssertEqual(try gauge(metrics, "logbook_ring_chunks", [("state", "active")]), 0)
        XCTAssertEqual(try gauge(metrics, "logbook_ring_bytes_in_use"), Double(8 * 64 + Int(counters.bytes)))
        XCTAssertTrue(metrics.recorders(label: "logbook_archive_lag_chunks").isEmpty, "no archiver: no archive metrics")
        try bundle.close()
    }

    func testPrefixAndDimensionsAreOnEveryMetric() throws {
        let path = makeTemporaryDirectory(self) + "/app.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let metrics = TestMetrics()
        let reporter = LogbookMetricsReporter(bundle: bundle, labelPrefix: "myapp_log", dimensions: [("service", "api")],
                                              factory: metrics)
        let log = try bundle.logger("app")
        log.info("one \(1)")
        reporter.poll()
        XCTAssertEqual(try counter(metrics, "myapp_log_records_total", [("service", "api")]), 1)
        XCTAssertEqual(try counter(metrics, "myapp_log_dropped_records_total", [("service", "api"), ("reason", "closed")]), 0)
        let metricsMade = metrics.counters.map { ($0.label, $0.dimensions) } + metrics.recorders.map { ($0.label, $0.dimensions) }
        XCTAssertGreaterThan(metricsMade.count, 15)
        for (label, dimensions) in metricsMade {
            XCTAssertTrue(label.hasPrefix("myapp_log_"), label)
            XCTAssertTrue(dimensions.contains { $0 == ("service", "api") }, label)
        }
        let unprefixed = LogbookMetricsReporter(bundle: bundle, labelPrefix: "", factory: metrics)
        log.info("two \(2)")
        unprefixed.poll()
        XCTAssertEqual(try counter(metrics, "records_total"), 1)
        try bundle.close()
    }

    /// Uploads settled by a real HTTP server (Tests/Servers/upload_server.py): two delivered, one
    /// given up with a 400; the queue gauges before and after.
    func testUploaderQueueAndOutcomes() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let ok = server.url("/ok"), refused = server.url("/status/400")
        let uploader = try Uploader(.init(spool: dir + "/spool") { item in
            DeliveryRequest(method: "PUT", url: (item.id.hasPrefix("bad") ? refused : ok).absoluteString)
        })
        let bundle = try LogBundle(path: dir + "/app.logbook", capacity: 1 << 20, chunkSize: 16 << 10)
        let metrics = TestMetrics()
        let reporter = LogbookMetricsReporter(bundle: bundle, uploaders: ["reports": uploader], factory: metrics)
        _ = try uploader.submit(data: [UInt8](repeating: 1, count: 100), id: "good-1")
        _ = try uploader.submit(data: [UInt8](repeating: 2, count: 250), id: "good-2")
        _ = try uploader.submit(data: [UInt8](repeating: 3, count: 30), id: "bad-1")
        reporter.poll()
        let named = [("uploader", "reports")]
        XCTAssertEqual(try gauge(metrics, "logbook_upload_pending_items", named), 3)
        XCTAssertEqual(try gauge(metrics, "logbook_upload_pending_bytes", named), 380)
        XCTAssertEqual(try gauge(metrics, "logbook_upload_in_flight", named), 0)
        uploader.start()
        let watchdog = Task {  // stop() ends `outcomes`: a server that never answers fails the test, never hangs it
            try await Task.sleep(for: .seconds(120))
            await uploader.stop()
        }
        var outcomes: [Uploader.Outcome] = []
        for await outcome in uploader.outcomes {
            outcomes.append(outcome)
            if outcomes.count == 3 { break }
        }
        watchdog.cancel()
        await uploader.stop()
        reporter.poll()
        XCTAssertEqual(outcomes.count, 3)
        func outcome(_ name: String) throws -> Int64 {
            try counter(metrics, "logbook_upload_outcomes_total", named + [("outcome", name)])
        }
        XCTAssertEqual(try outcome("delivered"), 2)
        XCTAssertEqual(try outcome("gave_up"), 1)
        XCTAssertEqual(try outcome("expired"), 0)
        XCTAssertEqual(try outcome("dropped"), 0)
        XCTAssertEqual(try counter(metrics, "logbook_upload_delivered_bytes_total", named), 350)
        XCTAssertEqual(try counter(metrics, "logbook_upload_attempts_total", named), Int64(server.requests().count))
        XCTAssertEqual(try counter(metrics, "logbook_upload_attempts_total", named), 3)
        XCTAssertEqual(try counter(metrics, "logbook_upload_failed_attempts_total", named), 1)
        XCTAssertEqual(try gauge(metrics, "logbook_upload_pending_items", named), 0)
        XCTAssertEqual(try gauge(metrics, "logbook_upload_pending_bytes", named), 0)
        try bundle.close()
    }

    /// An exporter's deliveries, refusals and give-ups against Tests/Servers/otlp_server.py: 250
    /// records in batches of 100; the first batch is a partial success (3 rejected), the second
    /// answered 400 (given up), the third delivered.
    func testExporterDeliveriesAndGiveUps() async throws {
        try requireOTLPDefinitions()
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        let bundle = try LogBundle(path: dir + "/app.logbook", capacity: 1 << 20, chunkSize: 16 << 10)
        let log = try bundle.logger("app")
        for i in 0..<250 { log.info("record \(i)") }
        try bundle.flush()
        let policy = RetryPolicy(retryableStatuses: [503], baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
        // One request at a time: the collector's script answers them in the order they arrive.
        let exporter = try Exporter(.init(source: dir + "/app.logbook", destinationName: "collector", cursors: dir + "/cursors",
                                          maximumBatchRecords: 100, requestsInFlight: 1),
                                    otlp: OTLPDestination(url: server.url("/s/partial3,400/v1/logs"), policy: policy),
                                    encoding: OTLPLogsEncoding(serviceName: "test"))
        let metrics = TestMetrics()
        let reporter = LogbookMetricsReporter(bundle: bundle, exporters: [exporter], factory: metrics)
        let named = [("destination", "collector")]
        let report = try await exporter.exportAvailable()
        XCTAssertEqual(report.exported, 150)
        XCTAssertEqual(report.rejected, 3)
        XCTAssertEqual(report.gaveUp.count, 1)
        reporter.poll()
        XCTAssertEqual(try counter(metrics, "logbook_export_records_total", named), 150)
        XCTAssertEqual(try counter(metrics, "logbook_export_rejected_records_total", named), 3)
        XCTAssertEqual(try counter(metrics, "logbook_export_gave_up_batches_total", named), 1)
        XCTAssertEqual(try counter(metrics, "logbook_export_gave_up_records_total", named), 100)
        XCTAssertEqual(try counter(metrics, "logbook_export_passes_total", named), 1)
        XCTAssertEqual(try counter(metrics, "logbook_export_failed_passes_total", named), 0)
        XCTAssertEqual(try gauge(metrics, "logbook_export_pending_records", named), 0)
        let statistics = exporter.statistics
        XCTAssertEqual([statistics.exported, statistics.recordsGivenUp, statistics.passes, statistics.pending], [150, 100, 1, 0])
        // New records: the next pass sends only them.
        for i in 0..<10 { log.info("later \(i)") }
        try bundle.flush()
        _ = try await exporter.exportAvailable()
        reporter.poll()
        XCTAssertEqual(try metrics.expectCounter("logbook_export_records_total", named).values, [150, 10])
        XCTAssertEqual(try counter(metrics, "logbook_export_passes_total", named), 2)
        XCTAssertEqual(try counter(metrics, "logbook_records_total"), 10, "the bundle's own metrics too")
        try bundle.close()
    }

    /// The way `run()`'s documentation puts the reporter in a `ServiceGroup`: it polls while the
    /// group runs and ends with the group's graceful shutdown.
    func testRunInAServiceGroupEndsOnGracefulShutdown() async throws {
        struct MetricsService: Service {
            let reporter: LogbookMetricsReporter
            func run() async throws { await cancelWhenGracefulShutdown { await reporter.run() } }
        }
        let path = makeTemporaryDirectory(self) + "/app.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let metrics = TestMetrics()
        let reporter = LogbookMetricsReporter(bundle: bundle, interval: .milliseconds(20), factory: metrics)
        let group = ServiceGroup(services: [MetricsService(reporter: reporter)], logger: Logging.Logger(label: "metrics-test"))
        let running = Task { try await group.run() }
        let gauge = try metrics.expectGauge("logbook_ring_capacity_bytes")
        let polled = await eventually { gauge.values.count >= 2 }
        XCTAssertTrue(polled, "polled while the group runs")
        let log = try bundle.logger("app")
        for i in 0..<5 { log.info("record \(i)") }
        await group.triggerGracefulShutdown()
        try await running.value
        XCTAssertEqual(try counter(metrics, "logbook_records_total"), 5, "the last poll, at shutdown")
        try bundle.close()
    }
}
