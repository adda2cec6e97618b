// Writes the bundle that Benchmarks/query.sh queries: RECORDS records from four threads with
// typed arguments, metadata and errors, through a 16 MiB lossless ring into 64 MiB archive files
// (compression level 1), so that no record is overwritten. The mix, by a hash of the record's
// number (the same bundle every run):
//   80% info     "request {} took {} ms"                      user, duration_us
//   15% warning  "slow request {} took {} ms, budget {} ms"   user, route
//    5% error    "request {} failed after {} ms"              user, attempt, and an error
// with user = "u" + (id % 1000) as a string, so each user has RECORDS / 1000 records.
// Usage: QueryBench BUNDLE RECORDS
import Foundation
import Logbook

struct UpstreamError: Error, CustomStringConvertible {
    let code: Int
    var description: String { "upstream answered \(code)" }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let records = Int(arguments[2]), records > 0 else {
    FileHandle.standardError.write("usage: QueryBench BUNDLE RECORDS\n".data(using: .utf8)!)
    exit(2)
}
let bundle = try LogBundle(
    path: arguments[1], capacity: 16 << 20, chunkSize: 64 << 10, wrapPolicy: .lossless, losslessWaitMilliseconds: 60_000,
    archive: ArchiveOptions(maxFileSize: 64 << 20, maxFiles: nil, quota: nil, compressionLevel: 1))
let log = try bundle.logger("api")
let routes = ["/v1/items", "/v1/users", "/v1/search", "/v1/cart/checkout"]
let threads = 4

/// A fixed hash of the record's number (splitmix64), so that every run writes the same records.
@Sendable @inline(__always) func mix(_ value: Int) -> UInt64 {
    var z = UInt64(truncatingIfNeeded: value) &+ 0x9E37_79B9_7F4A_7C15
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}

DispatchQueue.concurrentPerform(iterations: threads) { thread in
    for id in stride(from: thread, to: records, by: threads) {
        let h = mix(id)
        let kind = Int(h % 100)
        let ms = Int((h >> 8) % 2000)
        let user = "u\(id % 1000)"
        if kind < 80 {
            log.info("request \(id) took \(ms) ms",
                     metadata: ["user": .init(user), "duration_us": .init(ms * 1000 + Int((h >> 24) % 1000))])
        } else if kind < 95 {
            log.warning("slow request \(id) took \(ms) ms, budget \(500) ms",
                        metadata: ["user": .init(user), "route": .init(routes[Int((h >> 32) % 4)])])
        } else {
            log.error("request \(id) failed after \(ms) ms",
                      metadata: ["user": .init(user), "attempt": .init(Int((h >> 40) % 3) + 1)],
                      error: UpstreamError(code: 500 + Int((h >> 44) % 4)))
        }
    }
}
try bundle.close()
