// The write path: C API from C and from Swift, the Swift façade with scalars, a String, a private
// argument, a disabled logger, and two threads. Every logging benchmark also asserts zero mallocs.
import Benchmark
import CBenchSupport
import CLogbook
import Logbook
#if canImport(Glibc)
import Glibc
#endif

/// A fresh bundle for one benchmark, in /tmp (tmpfs or disk: the ring is a mapping either way).
/// The default ring (16 MiB, 64 KiB chunks) wraps during a run: the flight recorder's steady state.
func makeBundle(_ name: String, capacity: Int = 16 << 20) -> LogBundle {
    let path = "/tmp/logbook-bench-\(getpid())-\(name).logbook"
    _ = try? FileManager_removeAll(path)
    return try! LogBundle(path: path, capacity: capacity, chunkSize: 64 << 10, idleSealMilliseconds: 0)
}

func FileManager_removeAll(_ path: String) throws {
    for file in ["ring", "meta", "lock"] { unlink(path + "/" + file) }
    rmdir(path)
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .instructions, .mallocCountTotal, .throughput],
        timeUnits: .nanoseconds,
        warmupIterations: 3,
        scalingFactor: .mega,
        maxDuration: .seconds(3),
        maxIterations: 50,
        thresholds: [.mallocCountTotal: .init(absolute: [.p100: 0])]
    )

    Benchmark("Noop (loop baseline)") { benchmark in
        for i in benchmark.scaledIterations { blackHole(i) }
    }

    Benchmark("C API from C, 3 scalars") { benchmark in
        let bundle = makeBundle("c")
        let logger = try! bundle.logger("c")
        benchmark.startMeasurement()
        bench_c_log(logger.cLogger, UInt64(benchmark.scaledIterations.count))
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("C API from Swift, 3 scalars") { benchmark in
        let bundle = makeBundle("cswift")
        let logger = try! bundle.logger("cswift")
        let raw = logger.cLogger
        var site: UInt32 = 0
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            let writer = lb_writer_get(raw.pointee.bundle)!
            lb_record_begin(writer, raw.pointee.id, UInt8(LB_LEVEL_INFO.rawValue))
            lb_record_put_int(writer, Int64(i))
            lb_record_put_f64(writer, Double(i) * 0.25)
            lb_record_put_bool(writer, i & 1 == 1)
            if site == 0 { site = lb_site_register_c(raw.pointee.bundle, "bench", 1, "bench", "request {} took {} ms ok={}") }
            lb_record_commit(writer, site)
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("Swift façade, 3 scalars") { benchmark in
        let bundle = makeBundle("swift3")
        let log = try! bundle.logger("swift")
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("Swift façade, 3 scalars + 16-byte String") { benchmark in
        let bundle = makeBundle("swiftstr")
        let log = try! bundle.logger("swift")
        let path = "/api/v1/users/42"  // 16 bytes: a small string, stored inline
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            log.info("request \(i) \(path) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    // The same message as "3 scalars" with two metadata values (an Int and a 16-byte String),
    // and with an error: the tail a call with `metadata:` or `error:` adds.
    Benchmark("Swift façade, 3 scalars + 2 metadata values") { benchmark in
        let bundle = makeBundle("swiftmeta")
        let log = try! bundle.logger("swift")
        let path = "/api/v1/users/42"
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)", metadata: ["status": 200, "path": "\(path)"])
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    // Request-scoped metadata (a request id and a user): passed with every call, against carried
    // by the logger (`log.with(metadata:)` once per request, here once per 100 records).
    Benchmark("Swift façade, 3 scalars + request metadata passed with the call") { benchmark in
        let bundle = makeBundle("swiftreqcall")
        let log = try! bundle.logger("swift")
        let id = "7f3a9c2e-41d2", user = "alice"
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)", metadata: ["request_id": "\(id)", "user": "\(user)"])
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("Swift façade, 3 scalars + request metadata carried by the logger") { benchmark in
        let bundle = makeBundle("swiftreqlogger")
        let base = try! bundle.logger("swift")
        let id = "7f3a9c2e-41d2", user = "alice"
        var log = base.with(metadata: ["request_id": "\(id)", "user": "\(user)"])
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            if i % 100 == 0 { log = base.with(metadata: ["request_id": "\(id)", "user": "\(user)"]) }
            log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    // Two literal/scalar values on a constant message: what the "no allocation" names.
    Benchmark("Swift façade, constant message + 2 literal metadata values") { benchmark in
        let bundle = makeBundle("swiftmetalit")
        let log = try! bundle.logger("swift")
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            log.info("request done", metadata: ["status": 200, "attempt": .init(i)])
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("Swift façade, 3 scalars + error") { benchmark in
        struct Timeout: Error, CustomStringConvertible {
            var description: String { "timed out" }
        }
        let bundle = makeBundle("swifterror")
        let log = try! bundle.logger("swift")
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)", error: Timeout())
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("Swift façade, private argument") { benchmark in
        let bundle = makeBundle("swiftpriv")
        let log = try! bundle.logger("swift")
        let user = "alice@example.com"
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            log.info("request \(i) for \(user, privacy: .private) took \(Double(i) * 0.25) ms")
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("Swift façade, disabled logger") { benchmark in
        let bundle = makeBundle("swiftoff")
        let log = try! bundle.logger("swift")
        log.minimumLevel = .warning
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("Swift façade, LogCategory type logger") { benchmark in
        let bundle = makeBundle("category")
        LogBundle.bootstrap(bundle)
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations { BenchConnection.log(i) }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("Swift façade, LogCategory type filtered out") { benchmark in
        let bundle = makeBundle("categoryoff")
        LogBundle.bootstrap(bundle)
        bundle.setLevel(nil, for: BenchConnection.logCategory)
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations { BenchConnection.log(i) }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    Benchmark("C API from C, 2 threads (per record, aggregate)") { benchmark in
        let bundle = makeBundle("c2")
        let logger = try! bundle.logger("c2")
        benchmark.startMeasurement()
        _ = bench_c_log_two_threads(logger.cLogger, UInt64(benchmark.scaledIterations.count / 2))
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }

    swiftTwoThreads("Swift façade, 2 threads (per record, aggregate)", capacity: 16 << 20)
    // Every record lands on a cache line not touched for a whole lap: bound by DRAM bandwidth.
    swiftTwoThreads("Swift façade, 2 threads, 256 MiB ring (per record, aggregate)", capacity: 256 << 20)
}

/// Two threads logging the three-scalar message; the time per record is for both together.
func swiftTwoThreads(_ name: String, capacity: Int) {
    Benchmark(name) { benchmark in
        let bundle = makeBundle("swift2-\(capacity)", capacity: capacity)
        let log = try! bundle.logger("swift2")
        let perThread = benchmark.scaledIterations.count / 2
        benchmark.startMeasurement()
        runOnTwoThreads {
            for i in 0..<perThread {
                log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
            }
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(bundle) {}
    }
}

final class Job: @unchecked Sendable {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

private func jobMain(_ raw: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue().body()
    return nil
}

/// Runs `body` on two new threads at once and waits for both.
func runOnTwoThreads(_ body: @escaping () -> Void) {
    var threads = [pthread_t(), pthread_t()]
    for index in 0..<2 {
        pthread_create(&threads[index], nil, jobMain, Unmanaged.passRetained(Job(body)).toOpaque())
    }
    for thread in threads { pthread_join(thread, nil) }
}

/// A type that logs under its category (LogCategory), as application code would.
enum BenchConnection: LogCategory {
    static func log(_ i: Int) {
        logger.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
    }
}
