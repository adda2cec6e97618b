// Export throughput (Benchmarks/export.sh): the same records read back and rendered as
// `logbook show --json` lines, encoded as OTLP JSON and protobuf bodies of 512 records and as syslog frames, and
// delivered end to end to a discarding loopback receiver (Benchmarks/Upload/sink.c),
// in one run; rounds interleaved, medians with their spread. Usage: ExportBench RECORDS ROUNDS PORT
import Foundation
import Logbook
import LogbookExport

let arguments = CommandLine.arguments
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
    var entries: [LogEntry] = []
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
