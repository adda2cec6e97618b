// The message cache against what a user would use instead, in one run (Benchmarks/cache.sh):
// appends of a 100-byte message (raw bytes, and a small Codable struct) at each durability level,
// beside the reference's pattern (length-prefixed JSON written per message with FileHandle, the
// header rewritten per append, as CacheAdvance's README describes it) and SQLite (one INSERT per
// message, WAL, synchronous=NORMAL and FULL), and 8 threads appending with power durability
// (group commit). Rounds are interleaved; each row's p50 is the median of its rounds' p50s, with
// their spread.
import CLogbookCache
import CSQLite
import Foundation
import LogbookCache

#if canImport(Glibc)
import Glibc
#endif

let directory = "/var/tmp/logbook-cache-bench-\(getpid())"
mkdir(directory, 0o700)
defer { _ = try? FileManager.default.removeItem(atPath: directory) }
let cacheBytes = 512 << 10  // every row but the power ones wraps: eviction is measured too
let rounds = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 5

/// About 100 bytes of JSON.
struct Event: Codable {
    var name = "button.tapped"
    var screen = "settings"
    var id = 0
    var timestamp = 1_732_400_000.125
    var success = true
}

let rawMessage = [UInt8]((0..<100).map { UInt8(ascii: "a") + UInt8($0 % 26) })

@inline(__always) func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Nanoseconds per operation, one sample per `batch` operations.
func sample(samples: Int, batch: Int, _ operation: (Int) throws -> Void) rethrows -> [Double] {
    var result: [Double] = []
    result.reserveCapacity(samples)
    var n = 0
    for _ in 0..<samples {
        let start = monotonicNanoseconds()
        for _ in 0..<batch {
            try operation(n)
            n += 1
        }
        result.append(Double(monotonicNanoseconds() - start) / Double(batch))
    }
    return result
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func fresh(_ name: String) -> String {
    let path = directory + "/" + name
    for suffix in ["", "-wal", "-shm", ".new"] { unlink(path + suffix) }
    return path
}

// MARK: - The reference's pattern

/// What CacheAdvance does per append, as its README describes it and its source does it: the
/// message JSON-encoded and written with a length prefix through FileHandle at the write offset,
/// the header's two offsets rewritten around it (oldest message before, end of the newest after,
/// each a seek and an 8-byte write); when full, the oldest messages' length prefixes read to step
/// past them, and at the end of the file a truncate and a wrap to the start. Survives a crash of
/// the app (page cache), like `.process`.
final class ReferencePatternCache {
    let handle: FileHandle
    let maximum: UInt64
    let headerSize: UInt64 = 64
    var offset: UInt64 = 64  // where the next message goes
    var oldest: UInt64 = 64  // the oldest message kept
    var end: UInt64 = 64     // the end of the data in the file
    let encoder = JSONEncoder()

    init(path: String, maximumBytes: Int) throws {
        FileManager.default.createFile(atPath: path, contents: Data(count: 64))
        handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        maximum = UInt64(maximumBytes)
    }

    private func writeHeaderField(at position: UInt64, _ value: UInt64) throws {
        var bigEndian = value.bigEndian
        try handle.seek(toOffset: position)
        try handle.write(contentsOf: Data(bytes: &bigEndian, count: 8))
    }

    private func stepPastOldest() throws {
        if oldest >= end {
            oldest = headerSize
            return
        }
        try handle.seek(toOffset: oldest)
        let prefix = try handle.read(upToCount: 4) ?? Data()
        guard prefix.count == 4 else { fatalError("the reference pattern's file is short") }
        let length = prefix.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        oldest += 4 + length
    }

    func append(_ event: Event) throws {
        let body = try encoder.encode(event)
        let need = 4 + UInt64(body.count)
        if offset + need > maximum {  // wrap: cut the file at the writer and start over
            try handle.truncate(atOffset: offset)
            end = offset
            offset = headerSize
            oldest = headerSize
            try stepPastOldest()
        }
        while offset < oldest && offset + need >= oldest { try stepPastOldest() }
        try writeHeaderField(at: 16, oldest)
        var length = UInt32(body.count).bigEndian
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: Data(bytes: &length, count: 4) + body)
        offset += need
        end = max(end, offset)
        try writeHeaderField(at: 24, offset)
    }
}

// MARK: - SQLite

final class SQLiteTable {
    var db: OpaquePointer?
    var insert: OpaquePointer?

    init(path: String, synchronous: String) {
        guard sqlite3_open(path, &db) == SQLITE_OK else { fatalError("sqlite3_open \(path)") }
        sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=\(synchronous);", nil, nil, nil)
        sqlite3_exec(db, "CREATE TABLE messages (id INTEGER PRIMARY KEY, time INTEGER, body BLOB)", nil, nil, nil)
        sqlite3_prepare_v2(db, "INSERT INTO messages (time, body) VALUES (?, ?)", -1, &insert, nil)
    }

    func append(_ bytes: [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        sqlite3_bind_int64(insert, 1, Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec))
        bytes.withUnsafeBytes { raw in
            // SQLITE_TRANSIENT: SQLite copies the bytes.
            _ = sqlite3_bind_blob(insert, 2, raw.baseAddress, Int32(raw.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
        }
        guard sqlite3_step(insert) == SQLITE_DONE else { fatalError("sqlite3_step") }
        sqlite3_reset(insert)
    }

    deinit {
        sqlite3_finalize(insert)
        sqlite3_close(db)
    }
}

// MARK: - Rows

struct Row {
    var name: String
    var run: () throws -> [Double]  // ns per append, per sample
}

let jsonEncoder = JSONEncoder()
var rows: [Row] = [
    Row(name: "C `lb_cache_append`, raw 100 B, `.process`") {
        var options = lb_cache_options()
        lb_cache_options_init(&options)
        options.maximum_bytes = UInt64(cacheBytes)
        var cache: OpaquePointer?
        guard lb_cache_open(fresh("c.cache"), &options, &cache) == 0, let cache else { fatalError("lb_cache_open") }
        defer { lb_cache_close(cache) }
        return rawMessage.withUnsafeBytes { raw in
            sample(samples: 20_000, batch: 16) { _ in _ = lb_cache_append(cache, raw.baseAddress, raw.count, nil) }
        }
    },
    Row(name: "Swift `append(bytes:)`, raw 100 B, `.process`") {
        let cache = try MessageCache<Event>(file: fresh("raw.cache"), maximumBytes: cacheBytes)
        return try sample(samples: 20_000, batch: 16) { _ in try cache.append(bytes: rawMessage) }
    },
    Row(name: "Swift `append(message:)`, Codable, JSON, `.process`") {
        let cache = try MessageCache<Event>(file: fresh("json.cache"), maximumBytes: cacheBytes)
        return try sample(samples: 5_000, batch: 4) { n in try cache.append(message: Event(id: n)) }
    },
    Row(name: "Swift `append(message:)`, Codable, compact binary, `.process`") {
        let cache = try MessageCache<Event>(file: fresh("compact.cache"), maximumBytes: cacheBytes, encoding: .compactBinary)
        return try sample(samples: 5_000, batch: 4) { n in try cache.append(message: Event(id: n)) }
    },
    Row(name: "Reference's pattern: length-prefixed JSON, FileHandle writes, header offsets per append") {
        let cache = try ReferencePatternCache(path: fresh("reference.cache"), maximumBytes: cacheBytes)
        return try sample(samples: 3_000, batch: 4) { n in try cache.append(Event(id: n)) }
    },
    Row(name: "SQLite INSERT per message, WAL, synchronous=NORMAL") {
        let table = SQLiteTable(path: fresh("normal.sqlite"), synchronous: "NORMAL")
        return sample(samples: 3_000, batch: 4) { _ in table.append(rawMessage) }
    },
    Row(name: "Swift `append(bytes:)`, raw 100 B, `.power` (one thread)") {
        let cache = try MessageCache<Event>(file: fresh("power.cache"), maximumBytes: cacheBytes, durability: .power)
        return try sample(samples: 300, batch: 1) { _ in try cache.append(bytes: rawMessage) }
    },
    Row(name: "SQLite INSERT per message, WAL, synchronous=FULL") {
        let table = SQLiteTable(path: fresh("full.sqlite"), synchronous: "FULL")
        return sample(samples: 300, batch: 1) { _ in table.append(rawMessage) }
    },
    Row(name: "8 threads `append(bytes:)`, `.power` (group commit), per append") {
        let cache = try MessageCache<Event>(file: fresh("group.cache"), maximumBytes: cacheBytes, durability: .power)
        let perThread = 200  // 8 × 200 × 132 bytes: no wrap
        // Eight threads of their own (concurrentPerform would run only as many as there are cores).
        let start = monotonicNanoseconds()
        let done = DispatchGroup()
        for _ in 0..<8 {
            done.enter()
            Thread.detachNewThread {
                for _ in 0..<perThread { try! cache.append(bytes: rawMessage) }
                done.leave()
            }
        }
        done.wait()
        let elapsed = Double(monotonicNanoseconds() - start)
        return [elapsed / Double(8 * perThread)]  // wall time per append, all threads together
    },
    Row(name: "JSONEncoder alone (the Codable rows' encoding)") {
        sample(samples: 5_000, batch: 4) { n in _ = try! jsonEncoder.encode(Event(id: n)) }
    },
]

var results = [[(p50: Double, p99: Double)]](repeating: [], count: rows.count)
for round in 1...rounds {
    FileHandle.standardError.write("round \(round) of \(rounds)\n".data(using: .utf8)!)
    for (index, row) in rows.enumerated() {
        let samples = try row.run()
        results[index].append((percentile(samples, 0.5), percentile(samples, 0.99)))
    }
}

func format(_ ns: Double) -> String {
    ns >= 10_000 ? String(format: "%.0f µs", ns / 1000) : ns >= 1000 ? String(format: "%.1f µs", ns / 1000)
        : String(format: "%.0f ns", ns)
}

var medians: [Double] = []
print("| Append of a 100-byte message | p50 | spread of the rounds' p50 | p99 | appends/s |")
print("|---|---:|---:|---:|---:|")
for (index, row) in rows.enumerated() {
    let p50s = results[index].map(\.p50).sorted(), p99s = results[index].map(\.p99).sorted()
    let median = p50s[p50s.count / 2]
    medians.append(median)
    let p99 = index == 8 ? "–" : format(p99s[p99s.count / 2])
    print("| \(row.name) | \(format(median)) | \(format(p50s.first!))–\(format(p50s.last!)) | \(p99) | \(String(format: "%.0f", 1e9 / median)) |")
}
print("")
print("Targets (\(rounds) interleaved rounds, cache of \(cacheBytes >> 10) KiB that wraps, files on /\(directory.split(separator: "/").prefix(2).joined(separator: "/"))):")
print("- `.process` raw append p50 ≤ 150 ns: \(format(medians[1])) (Swift), \(format(medians[0])) (C)")
print(String(format: "- Codable (JSON) ≥ 2× the reference's pattern: %.1f× (compact binary: %.1f×)", medians[4] / medians[2], medians[4] / medians[3]))
print(String(format: "- `.power` ≥ SQLite FULL: %.2f× as fast (%@ against %@)", medians[7] / medians[6], format(medians[6]), format(medians[7])))
print(String(format: "- 8-thread group commit ≥ 5× SQLite FULL: %.1f× (%.0f appends/s)", medians[7] / medians[8], 1e9 / medians[8]))
