// A swift-log call through Logbook's backend (LogbookLogHandler) against swift-log's own
// StreamLogHandler, with the Peers suite's message shape: "request \(id) took \(ms) ms ok=\(ok)".
// swift-log renders the message to a String before any handler sees it, so the backend stores it
// as one string argument; metadata is stored typed.
import Benchmark
import Logbook
import LogbookLogging
import Logging
#if canImport(Glibc)
import Glibc
#endif

let scratch = "/tmp/logbook-swiftlog-\(getpid())"

func removeBundle(_ path: String) {
    for file in ["ring", "meta", "lock"] { unlink(path + "/" + file) }
    rmdir(path)
}

/// swift-log's floor: a handler that does only what any handler must, reading the
/// message's bytes and every metadata value, and nothing else. What swift-log itself costs a call
/// (building the `String`, merging metadata) is what this measures; a backend's own cost is the rest.
struct FloorLogHandler: LogHandler {
    var metadata: Logging.Logger.Metadata = [:]
    var logLevel: Logging.Logger.Level = .trace
    subscript(metadataKey key: String) -> Logging.Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var sum = 0
        var text = event.message.description
        text.withUTF8 { for byte in $0 { sum &+= Int(byte) } }
        func visit(_ value: Logging.Logger.Metadata.Value) {
            switch value {
            case .string(var string): string.withUTF8 { sum &+= $0.count }
            case .stringConvertible(let value): var string = value.description; string.withUTF8 { sum &+= $0.count }
            case .array(let values): values.forEach(visit)
            case .dictionary(let values): values.forEach { sum &+= $0.key.utf8.count; visit($0.value) }
            }
        }
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
            sum &+= key.utf8.count
            visit(value)
        }
        blackHole(sum)
    }
}

let benchmarks: @Sendable () -> Void = {
    mkdir(scratch, 0o700)
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .instructions, .mallocCountTotal, .throughput],
        timeUnits: .nanoseconds,
        warmupIterations: 2,
        scalingFactor: .kilo,
        maxDuration: .seconds(3),
        maxIterations: 100
    )

    func logbookLogger(_ name: String, filter: String = "") -> (LogBundle, Logging.Logger) {
        let path = scratch + "/\(name).logbook"
        removeBundle(path)
        let bundle = try! LogBundle(
            path: path, capacity: 64 << 20, chunkSize: 64 << 10, idleSealMilliseconds: 0,
            filter: try! LogFilter(parsing: filter), applyEnvironmentFilter: false)
        let logger = Logging.Logger(label: "bench") { LogbookLogHandler(label: $0, bundle: bundle) }
        return (bundle, logger)
    }

    Benchmark("swift-log through Logbook") { benchmark in
        let (bundle, logger) = logbookLogger("plain")
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            logger.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("swift-log through Logbook, 3 metadata values") { benchmark in
        let (bundle, base) = logbookLogger("metadata")
        var logger = base
        logger[metadataKey: "service"] = "api"
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            logger.info(
                "request done", metadata: ["request": .stringConvertible(i), "path": "/v1/items"])
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("swift-log through Logbook, label filtered out", configuration: .init(scalingFactor: .mega)) {
        benchmark in
        let (bundle, logger) = logbookLogger("filtered", filter: "bench=warning")
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            logger.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("swift-log through Logbook, constant message") { benchmark in
        let (bundle, logger) = logbookLogger("constant")
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { logger.info("request done") }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("swift-log floor: a handler that reads the message and the metadata") { benchmark in
        let logger = Logging.Logger(label: "bench") { _ in FloorLogHandler() }
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            logger.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
    }

    Benchmark("swift-log floor, 3 metadata values") { benchmark in
        var logger = Logging.Logger(label: "bench") { _ in FloorLogHandler() }
        logger[metadataKey: "service"] = "api"
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            logger.info("request done", metadata: ["request": .stringConvertible(i), "path": "/v1/items"])
        }
        benchmark.stopMeasurement()
    }

    Benchmark("swift-log floor, constant message") { benchmark in
        let logger = Logging.Logger(label: "bench") { _ in FloorLogHandler() }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { logger.info("request done") }
        benchmark.stopMeasurement()
    }

    // Server frameworks make a Logger per request (Vapor: `Logger(label: "codes.vapor.request")`), so
    // making one must not grow with the number of labels the program has used.
    Benchmark("swift-log Logger(label:) with 1,000 labels in use") { benchmark in
        let (bundle, _) = logbookLogger("labels")
        for i in 0..<1_000 { _ = LogbookLogHandler(label: "lib.component\(i)", bundle: bundle) }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(Logging.Logger(label: "lib.component999") { LogbookLogHandler(label: $0, bundle: bundle) })
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("swift-log StreamLogHandler, below its level", configuration: .init(scalingFactor: .mega)) {
        benchmark in
        var logger = Logging.Logger(label: "bench") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .warning
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            logger.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
    }

    Benchmark("swift-log StreamLogHandler to a file (SwiftLog suite)") { benchmark in
        // StreamLogHandler writes to stdout or stderr only: send stderr to a file meanwhile.
        let file = open(scratch + "/stream.log", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let saved = dup(2)
        dup2(file, 2)
        let logger = Logging.Logger(label: "bench") { StreamLogHandler.standardError(label: $0) }
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            logger.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
        dup2(saved, 2)
        close(saved)
        close(file)
    }
}
