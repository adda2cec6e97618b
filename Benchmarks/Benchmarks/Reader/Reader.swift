// The reading side: decoding a bundle (records/s; ×48 bytes per record for MB/s), decoding into
// Swift entries, and rendering `logbook show --json` / text lines (lines/s).
import Benchmark
import CLogbook
import Logbook
#if canImport(Glibc)
import Glibc
#endif

let path = "/tmp/logbook-reader-bench-\(getpid()).logbook"
let recordCount = 1_000_000

/// A bundle of one million "request {} took {} ms ok={}" records from two threads.
func writeSample() {
    for file in ["ring", "meta", "lock"] { unlink(path + "/" + file) }
    rmdir(path)
    let bundle = try! LogBundle(path: path, capacity: 128 << 20, chunkSize: 64 << 10, idleSealMilliseconds: 0)
    let log = try! bundle.logger("bench")
    DispatchLike.runTwice { half in
        for i in stride(from: half, to: recordCount, by: 2) {
            log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
        }
    }
    try! bundle.close()
}

enum DispatchLike {
    final class Box: @unchecked Sendable {
        let body: (Int) -> Void
        let index: Int
        init(_ body: @escaping (Int) -> Void, _ index: Int) {
            self.body = body
            self.index = index
        }
    }

    static func runTwice(_ body: @escaping (Int) -> Void) {
        var threads = [pthread_t(), pthread_t()]
        for index in 0..<2 {
            pthread_create(&threads[index], nil, { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body(box.index)
                return nil
            }, Unmanaged.passRetained(Box(body, index)).toOpaque())
        }
        for thread in threads { pthread_join(thread, nil) }
    }
}

let benchmarks: @Sendable () -> Void = {
    writeSample()
    let entries = try! LogReader(path: path).readAll()
    precondition(entries.count == recordCount, "sample has \(entries.count) entries")
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident],
        timeUnits: .nanoseconds,
        warmupIterations: 1,
        scalingFactor: .mega,
        maxDuration: .seconds(5),
        maxIterations: 20
    )

    Benchmark("Noop (loop baseline)") { benchmark in
        for i in benchmark.scaledIterations { blackHole(i) }
    }

    Benchmark("Decode: C reader scan, 1M records (per record)") { benchmark in
        var reader: OpaquePointer?
        benchmark.startMeasurement()
        lb_reader_open(path, &reader)
        let count = lb_reader_scan(reader)
        benchmark.stopMeasurement()
        precondition(count == recordCount)
        lb_reader_close(reader)
    }

    Benchmark("Decode: Swift LogReader to LogEntry, 1M records (per record)") { benchmark in
        benchmark.startMeasurement()
        let decoded = try! LogReader(path: path).readAll()
        benchmark.stopMeasurement()
        precondition(decoded.count == recordCount)
    }

    Benchmark("Render: JSON lines as `logbook show --json` (per line)") { benchmark in
        var renderer = LineRenderer()
        benchmark.startMeasurement()
        for entry in entries {
            renderer.append(entry, as: .json)
            if renderer.bytes.count >= 1 << 16 { renderer.removeAll() }
        }
        benchmark.stopMeasurement()
    }

    Benchmark("Render: text lines as `logbook show` (per line)") { benchmark in
        var renderer = LineRenderer()
        benchmark.startMeasurement()
        for entry in entries {
            renderer.append(entry, as: .text(includeSource: false))
            if renderer.bytes.count >= 1 << 16 { renderer.removeAll() }
        }
        benchmark.stopMeasurement()
    }
}
