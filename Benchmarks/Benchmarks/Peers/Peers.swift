// Logbook against what a user would use instead, one message shape for all:
// "request \(id) took \(ms) ms ok=\(ok)" (Int, Double, Bool). Ratios are computed by run.sh from
// one run of this suite, which includes its own Logbook baseline.
import Benchmark
import CSQLite
import Logbook
import Logging
import PureSwiftLogbook
#if canImport(Glibc)
import Glibc
#endif

let scratch = "/tmp/logbook-peers-\(getpid())"

func removeBundle(_ path: String) {
    for file in ["ring", "meta", "lock"] { unlink(path + "/" + file) }
    rmdir(path)
}

/// The line text loggers write: a timestamp, the level and the rendered message.
@inline(__always)
func formattedLine(_ id: Int, _ ms: Double, _ ok: Bool) -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    let time = formatRFC3339(nanoseconds: Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec))
    return "\(time) info request \(id) took \(ms) ms ok=\(ok)\n"
}

let benchmarks: @Sendable () -> Void = {
    mkdir(scratch, 0o700)
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .instructions, .mallocCountTotal, .throughput],
        timeUnits: .nanoseconds,
        warmupIterations: 2,
        scalingFactor: .mega,
        maxDuration: .seconds(3),
        maxIterations: 30
    )
    let slow = Benchmark.Configuration(scalingFactor: .kilo, maxDuration: .seconds(3), maxIterations: 30)

    Benchmark("Noop (loop baseline)") { benchmark in
        for i in benchmark.scaledIterations { blackHole(i) }
    }

    Benchmark("Logbook Swift façade",
              configuration: .init(thresholds: [.mallocCountTotal: .init(absolute: [.p100: 0])])) { benchmark in
        let path = scratch + "/facade.logbook"
        removeBundle(path)
        let bundle = try! LogBundle(path: path, capacity: 16 << 20, chunkSize: 64 << 10, idleSealMilliseconds: 0)
        let log = try! bundle.logger("bench")
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("Pure-Swift write path (same format, no C)",
              configuration: .init(thresholds: [.mallocCountTotal: .init(absolute: [.p100: 0])])) { benchmark in
        let path = scratch + "/pure.logbook"
        removeBundle(path)
        let bundle = try! PureSwiftBundle(path: path, capacity: 16 << 20, chunkSize: 64 << 10)
        try! bundle.register(logger: 1, name: "bench", site: 1, template: "request {} took {} ms ok={}")
        var writer = PureSwiftWriter(bundle: bundle)
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            writer.log(site: 1, logger: 1, level: 3, id: i, ms: Double(i) * 0.25, ok: i & 1 == 1)
        }
        benchmark.stopMeasurement()
        writer.seal()
    }

    Benchmark("swift-log StreamLogHandler to a file", configuration: slow) { benchmark in
        // StreamLogHandler writes to stdout or stderr only: send stderr to a file meanwhile.
        let file = open(scratch + "/stream.log", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let saved = dup(2)
        dup2(file, 2)
        let logger = Logger(label: "bench") { StreamLogHandler.standardError(label: $0) }
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            logger.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
        dup2(saved, 2)
        close(saved)
        close(file)
    }

    Benchmark("write(2) per message (formatted line)", configuration: slow) { benchmark in
        let fd = open(scratch + "/write.log", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o600)
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            var line = formattedLine(i, Double(i) * 0.25, i & 1 == 1)
            line.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
        }
        benchmark.stopMeasurement()
        close(fd)
    }

    func sqliteBenchmark(_ name: String, oneTransaction: Bool) {
        Benchmark(name, configuration: slow) { benchmark in
            let path = scratch + "/\(oneTransaction ? "batch" : "auto").sqlite"
            for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
            var db: OpaquePointer?
            guard sqlite3_open(path, &db) == SQLITE_OK else { fatalError("sqlite3_open \(path)") }
            sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", nil, nil, nil)
            sqlite3_exec(db, "CREATE TABLE logs (time INTEGER, level INTEGER, message TEXT)", nil, nil, nil)
            var insert: OpaquePointer?
            sqlite3_prepare_v2(db, "INSERT INTO logs VALUES (?, ?, ?)", -1, &insert, nil)
            benchmark.startMeasurement()
            if oneTransaction { sqlite3_exec(db, "BEGIN", nil, nil, nil) }
            for i in benchmark.scaledIterations {
                var now = timespec()
                clock_gettime(CLOCK_REALTIME, &now)
                var message = "request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)"
                sqlite3_bind_int64(insert, 1, Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec))
                sqlite3_bind_int(insert, 2, 3)
                message.withUTF8 { text in
                    // SQLITE_TRANSIENT: SQLite copies the text.
                    sqlite3_bind_text(insert, 3, UnsafeRawPointer(text.baseAddress)?.assumingMemoryBound(to: CChar.self),
                                      Int32(text.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
                }
                guard sqlite3_step(insert) == SQLITE_DONE else { fatalError("sqlite3_step") }
                sqlite3_reset(insert)
            }
            if oneTransaction { sqlite3_exec(db, "COMMIT", nil, nil, nil) }
            benchmark.stopMeasurement()
            sqlite3_finalize(insert)
            sqlite3_close(db)
        }
    }
    sqliteBenchmark("SQLite INSERT per message (WAL, synchronous=NORMAL)", oneTransaction: false)
    sqliteBenchmark("SQLite INSERTs in one transaction (WAL)", oneTransaction: true)
}
