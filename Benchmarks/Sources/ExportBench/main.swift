// Export throughput (Benchmarks/export.sh): the same records read back and rendered as
// `logbook show --json` lines, encoded as OTLP JSON and protobuf bodies of 512 records and as syslog frames, and
// delivered end to end to a discarding loopback receiver (Benchmarks/Upload/sink.c),
// in one run; rounds interleaved, medians with their spread. Usage: ExportBench RECORDS ROUNDS PORT
import Foundation
import Logbook
import LogbookExport

let arguments = CommandLine.arguments
// `ExportBench write PATH RECORDS [numbers|strings|metadata] [archived]`: only writes a bundle of
// RECORDS records of that shape (logShaped) from 4 threads (the backlog that export.sh exports
// with the CLI); `archived`: lossless, through the archiver.
// `ExportBench live PATH RATE SECONDS`: makes the bundle at PATH, prints "ready", waits for a line
// on stdin, then writes RATE records a second (a burst each millisecond, paced by the clock) for
// SECONDS; prints the records written and the rate it held.
if arguments.count == 5 && arguments[1] == "live" {
    let rate = Int(arguments[3])!, seconds = Int(arguments[4])!
    let bundle = try LogBundle(path: arguments[2], capacity: max(64 << 20, rate * seconds * 160))
    let log = try bundle.logger("net")
    FileHandle.standardOutput.write("ready\n".data(using: .utf8)!)  // the bundle exists: the follower starts, then says go
    _ = readLine()
    let perTick = max(1, rate / 1000)
    let start = DispatchTime.now().uptimeNanoseconds
    var written = 0
    for tick in 0..<(seconds * 1000) {
        let due = start + UInt64(tick) * 1_000_000
        let now = DispatchTime.now().uptimeNanoseconds
        if due > now { usleep(UInt32((due - now) / 1000)) }
        for _ in 0..<perTick {
            log.info("request \(written) took \(Double(written % 1000) * 0.25) ms ok=\(written & 1 == 1)",
                     metadata: ["status": 200, "path": "/v1/items"])
            written += 1
        }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    try bundle.close()
    print("\(written) \(Int(Double(written) / elapsed))")
    exit(0)
}
if (4...6).contains(arguments.count) && arguments[1] == "write" {
    let records = Int(arguments[3])!
    let shape = arguments.count > 4 ? arguments[4] : "numbers"
    // `archived`: a lossless ring of 64 MiB whose chunks the archiver keeps (zstd files, no
    // retention), so most of the backlog is read from archive files, as a fleet's would be.
    let archived = arguments.count > 5 && arguments[5] == "archived"
    let bundle = archived
        ? try LogBundle(path: arguments[2], capacity: 64 << 20, wrapPolicy: .lossless, losslessWaitMilliseconds: 600_000,
                        archive: ArchiveOptions(maxFiles: nil, quota: nil))
        : try LogBundle(path: arguments[2], capacity: max(64 << 20, records * (shape == "numbers" ? 160 : 640)))
    let group = DispatchGroup()
    for thread in 0..<4 {
        group.enter()
        Thread {
            let log = try! bundle.logger("net")
            for i in stride(from: thread, to: records, by: 4) { logShaped(log, shape, i) }
            group.leave()
        }.start()
    }
    group.wait()
    try bundle.close()
    exit(0)
}

/// One record of a backlog's shape: `numbers` (a short text, three numbers and two metadata
/// values: the export rows so far), `strings` (five strings of 20 to 180 bytes, about 400 bytes
/// of text a record) or `metadata` (a short text and 11 metadata values).
func logShaped(_ log: Logger, _ shape: String, _ i: Int) {
    switch shape {
    case "strings":
        let user = "user-\(i % 9973)@example.org", path = "/v1/accounts/\(i % 977)/items/\(i)"
        let agent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.\(i % 100).0 Safari/537.36"
        let query = "filter=status%3Dactive&sort=-updated&page=\(i % 50)&fields=id,name,owner,created,updated,tags"
        let note = "cache miss on shard \(i % 16); fetched from the primary in the second region after a retry"
        log.info("\(user) requested \(path)?\(query) with \(agent): \(note)")
    case "metadata":
        log.info("request \(i) done", metadata: [
            "status": 200, "path": "/v1/items", "method": "GET", "user": "u\(i % 9973)", "region": "eu-west-1",
            "shard": .value(.signed(Int64(i % 16), .int)), "attempt": 1, "cached": .value(.bool(i & 1 == 1)),
            "bytes": .value(.signed(Int64(i % 65536), .int)), "ms": .value(.double(Double(i % 1000) * 0.25)),
            "trace": "4bf92f3577b34da6a3ce929d0e0e4736",
        ])
    default:
        log.info("request \(i) took \(Double(i % 1000) * 0.25) ms ok=\(i & 1 == 1)", metadata: ["status": 200, "path": "/v1/items"])
    }
}

let total = Int(arguments.dropFirst().first ?? "") ?? 200_000
let rounds = Int(arguments.dropFirst(2).first ?? "") ?? 3
let port = arguments.dropFirst(3).first ?? ""
let directory = "/var/tmp/logbook-export-bench-\(getpid())"
mkdir(directory, 0o700)
defer { _ = try? FileManager.default.removeItem(atPath: directory) }

let bundle = try LogBundle(path: directory + "/bench.logbook", capacity: 256 << 20)
let log = try bundle.logger("net")
for i in 0..<total {
    log.info("request \(i) took \(Double(i % 1000) * 0.25) ms ok=\(i & 1 == 1)", metadata: ["status": 200, "path": "/v1/items"])
}
try bundle.close()

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

var rows: [String: [Double]] = [:]
let encoding = OTLPLogsEncoding(serviceName: "bench")
for round in 1...rounds {
    FileHandle.standardError.write("round \(round) of \(rounds)\n".data(using: .utf8)!)
    // EXPORT_BENCH_ONLY=end-to-end: only the last row (for a profiler).
    let onlyEndToEnd = ProcessInfo.processInfo.environment["EXPORT_BENCH_ONLY"] == "end-to-end"
    var entries: [LogEntry] = []
    if !onlyEndToEnd {
    let read = try seconds { entries = try LogReader(path: directory + "/bench.logbook").readAll() }
    rows["read (LogReader.readAll)", default: []].append(Double(entries.count) / read)
    var bytes = 0
    let json = seconds { for entry in entries { bytes &+= entry.jsonLine().utf8.count } }
    rows["JSON lines (show --json's rendering)", default: []].append(Double(entries.count) / json)
    var otlpBytes = 0
    let otlp = seconds {
        var start = 0
        while start < entries.count {
            let end = min(entries.count, start + 512)
            otlpBytes &+= encoding.body(for: Array(entries[start..<end]), observedNanoseconds: 0).count
            start = end
        }
    }
    rows["OTLP JSON encoding (512 per body)", default: []].append(Double(entries.count) / otlp)
    var protobufBytes = 0
    let protobuf = seconds {
        var start = 0
        while start < entries.count {
            let end = min(entries.count, start + 512)
            protobufBytes &+= encoding.protobufBody(for: Array(entries[start..<end]), observedNanoseconds: 0).count
            start = end
        }
    }
    rows["OTLP protobuf encoding (512 per body)", default: []].append(Double(entries.count) / protobuf)
    let syslogFormat = SyslogFormat(hostname: "bench", appName: "bench")
    var syslogBytes = 0
    let syslog = seconds { for entry in entries { syslogBytes &+= syslogFormat.frame(for: entry).bytes.count } }
    rows["RFC 5424 syslog frames", default: []].append(Double(entries.count) / syslog)
    }
    if !port.isEmpty {
        let destination = OTLPDestination(url: URL(string: "http://127.0.0.1:\(port)/discard")!)
        let cursors = directory + "/cursors-\(round)"
        nonisolated(unsafe) let exporter = try Exporter(.init(source: directory + "/bench.logbook", destinationName: "bench", cursors: cursors),
                                    otlp: destination, encoding: encoding)
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var exported = 0
        let start = DispatchTime.now().uptimeNanoseconds
        Task.detached {  // not the main actor: this thread waits for it
            exported = (try? await exporter.exportAvailable().exported) ?? -1
            done.signal()
        }
        done.wait()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        rows["end to end: Exporter to a discarding receiver", default: []].append(Double(exported) / elapsed)
    }
}
print("| \(total) records (info, 3 arguments, 2 metadata values) | records/s (median) | spread of rounds |")
print("|---|---:|---:|")
for name in ["read (LogReader.readAll)", "JSON lines (show --json's rendering)", "OTLP JSON encoding (512 per body)",
             "OTLP protobuf encoding (512 per body)",
             "RFC 5424 syslog frames", "end to end: Exporter to a discarding receiver"] {
    guard let values = rows[name]?.sorted() else { continue }
    print("| \(name) | \(String(format: "%.0f", values[values.count / 2])) | \(String(format: "%.0f–%.0f", values.first!, values.last!)) |")
}
