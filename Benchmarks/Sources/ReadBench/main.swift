// The read side (Benchmarks/read.sh): the C reader streaming and holding, Swift streaming,
// `logbook show` text and JSON rendering from streamed records, and LogStatistics, over the same
// bundle (1,000,000 "request {} took {} ms ok={}" records from two threads, 64 KiB chunks, as the
// Reader benchmark), in interleaved rounds; medians with their spread, in records/s.
// Usage: ReadBench BUNDLE ROUNDS [--write RECORDS | --write-archived RECORDS [--plain] | --write-mixed RECORDS] [--c-only]
//   (ROUNDS 0: write only; --write-mixed: a server's mix of records into uncompressed files)
//   --write: a 256 MiB ring holding every record; --write-archived: a 16 MiB lossless ring whose
//   chunks roll into 64 MiB archive files (every record ends up in them but the last chunks),
//   compressed at level 1 unless --plain.
import CLogbook
import Foundation
import Logbook
import LogbookStatistics

let arguments = CommandLine.arguments
let path = arguments[1]
let rounds = Int(arguments.dropFirst(2).first ?? "") ?? 5
if let at = arguments.firstIndex(of: "--write"), let records = Int(arguments[at + 1]) {
    let bundle = try LogBundle(path: path, capacity: 256 << 20, chunkSize: 64 << 10, idleSealMilliseconds: 0)
    let log = try bundle.logger("bench")
    DispatchQueue.concurrentPerform(iterations: 2) { half in
        for i in stride(from: half, to: records, by: 2) { log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)") }
    }
    try bundle.close()
}
if let at = arguments.firstIndex(of: "--write-archived"), let records = Int(arguments[at + 1]) {
    let bundle = try LogBundle(
        path: path, capacity: 16 << 20, chunkSize: 64 << 10, wrapPolicy: .lossless, losslessWaitMilliseconds: 60_000,
        archive: ArchiveOptions(maxFileSize: 64 << 20, maxFiles: nil, quota: nil,
                                compressionLevel: arguments.contains("--plain") ? nil : 1))
    let log = try bundle.logger("bench")
    DispatchQueue.concurrentPerform(iterations: 2) { half in
        for i in stride(from: half, to: records, by: 2) { log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)") }
    }
    try bundle.close()
}
if let at = arguments.firstIndex(of: "--write-mixed"), let records = Int(arguments[at + 1]) {
    // A server's mix, into uncompressed archive files (Benchmarks/compress.sh compresses them).
    let bundle = try LogBundle(
        path: path, capacity: 16 << 20, chunkSize: 64 << 10, wrapPolicy: .lossless, losslessWaitMilliseconds: 60_000,
        archive: ArchiveOptions(maxFileSize: 16 << 20, maxFiles: nil, quota: nil, compressionLevel: nil))
    let http = try bundle.logger("http")
    let db = try bundle.logger("db")
    let routes = ["/v1/items", "/v1/items/{id}", "/v1/users/{id}/orders", "/health", "/v1/search", "/v1/cart/checkout"]
    let methods = ["GET", "GET", "GET", "POST", "PUT", "DELETE"]
    struct Timeout: Error, CustomStringConvertible { let description: String }
    DispatchQueue.concurrentPerform(iterations: 2) { half in
        var state = UInt64(half + 1) &* 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 { state = state &* 6364136223846793005 &+ 1442695040888963407; return state >> 33 }
        for i in stride(from: half, to: records, by: 2) {
            let r = Int(next() % 6), user = "user-\(next() % 5000)", id = String(next(), radix: 16)
            let status = [200, 200, 200, 201, 204, 304, 404, 500][Int(next() % 8)]
            let ms = Double(next() % 250_000) / 1000
            switch i % 50 {
            case 0:
                http.warning("\(methods[r]) \(routes[r]) failed after \(ms) ms", metadata: ["request-id": .init(id), "user": .init(user)],
                             error: Timeout(description: "upstream timed out after \(ms) ms"))
            case 1...15:
                db.debug("query \(routes[r].count) rows=\(next() % 1000) in \(ms / 10) ms", metadata: ["table": .init(routes[r])])
            default:
                http.info("\(methods[r]) \(routes[r]) \(status) in \(ms) ms", metadata: [
                    "request-id": .init(id), "user": .init(user), "bytes": .init(Int(next() % 100_000))])
            }
        }
    }
    try bundle.close()
}
let onlyC = arguments.contains("--c-only")
if rounds == 0 { exit(0) }  // written only

func seconds(_ body: () throws -> Int) rethrows -> (Double, Int) {
    let start = DispatchTime.now().uptimeNanoseconds
    let count = try body()
    return (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, count)
}

func measure() throws -> [(String, [Double])] {
var rows: [(String, [Double])] = []
func note(_ name: String, _ rate: Double) {
    if let at = rows.firstIndex(where: { $0.0 == name }) { rows[at].1.append(rate) } else { rows.append((name, [rate])) }
}

for round in 1...rounds {
    FileHandle.standardError.write("round \(round) of \(rounds)\n".data(using: .utf8)!)
    // C: stream with a visitor that counts (what `lb_reader_stream` costs), then the holding scan.
    var (time, count) = seconds {
        var reader: OpaquePointer?
        lb_reader_open(path, &reader)
        var visited = 0
        let result = lb_reader_stream(reader, nil, { context, _ in
            context!.assumingMemoryBound(to: Int.self).pointee += 1
            return 0
        }, &visited)
        precondition(result == visited)
        lb_reader_close(reader)
        return visited
    }
    note("C reader: lb_reader_stream (records/s)", Double(count) / time)
    (time, count) = seconds {
        var reader: OpaquePointer?
        lb_reader_open(path, &reader)
        let n = lb_reader_scan(reader)
        lb_reader_close(reader)
        return n
    }
    note("C reader: lb_reader_scan, holding every entry (records/s)", Double(count) / time)
    if onlyC { continue }
    (time, count) = try seconds {
        var visited = 0, latest: Int64 = 0
        try LogReader(path: path).stream { record in
            visited += 1
            latest = max(latest, record.wallNanoseconds)
        }
        precondition(latest > 0)
        return visited
    }
    note("Swift: LogReader.stream, time of each record (records/s)", Double(count) / time)
    (time, count) = try seconds {
        var visited = 0, sum = 0.0
        try LogReader(path: path).stream { record in
            visited += 1
            record.forEachNumber { _, _, value in sum += value.doubleValue }
        }
        precondition(sum > 0)
        return visited
    }
    note("Swift: LogReader.stream, every numeric argument (records/s)", Double(count) / time)
    (time, count) = try seconds {
        var decoded = 0
        for entry in try LogReader(path: path).readAll() { decoded += entry.arguments.count > 0 ? 1 : 0 }
        return decoded
    }
    note("Swift: LogReader.readAll into LogEntry values (records/s)", Double(count) / time)
    for (name, format) in [("text", LineRenderer.Format.text(includeSource: false)), ("JSON", .json)] {
        (time, count) = try seconds {
            var renderer = LineRenderer(capacity: 1 << 17)
            var lines = 0
            try LogReader(path: path).stream { record in
                renderer.append(record, as: format)
                lines += 1
                if renderer.bytes.count >= 1 << 16 { renderer.removeAll() }
            }
            return lines
        }
        note("Render: \(name) lines from streamed records, as logbook show (lines/s)", Double(count) / time)
    }
    (time, count) = try seconds {
        let statistics = try LogStatistics(reading: LogReader(path: path))
        return Int(statistics.records)
    }
    note("Stats: LogStatistics per call site, percentiles of 2 arguments (records/s)", Double(count) / time)
}

return rows
}

let rows = try measure()
func millions(_ rate: Double) -> String { String(format: "%.1f M", rate / 1e6) }
print("| step | median | spread over \(rounds) rounds |")
print("|---|---:|---:|")
for (name, rates) in rows {
    let sorted = rates.sorted()
    print("| \(name) | \(millions(sorted[sorted.count / 2])) | \(millions(sorted.first!))–\(millions(sorted.last!)) |")
}
