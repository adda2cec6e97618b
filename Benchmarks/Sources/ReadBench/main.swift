// The read side (Benchmarks/read.sh): the C reader streaming and holding, Swift streaming,
// `logbook show` text and JSON rendering from streamed records, and LogStatistics, over the same
// bundle (1,000,000 "request {} took {} ms ok={}" records from two threads, 64 KiB chunks, as the
// Reader benchmark), in interleaved rounds; medians with their spread, in records/s.
// Usage: ReadBench BUNDLE ROUNDS [--write RECORDS | --write-archived RECORDS [--plain]] [--c-only]
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
let onlyC = arguments.contains("--c-only")

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
