import CLogbook
import CLogbookArchive
import CLogbookTestSupport
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

/// Every record written is read back once, with its values: shaped records of varying size
/// (short and long strings, metadata, chunk-sized and fragmented records) from many threads,
/// through small rings, lossless and overwrite, with and without the archiver.
/// Those of its tests that CI also runs under ThreadSanitizer are in `IntegrityConcurrencyTests`.
final class IntegrityTests: XCTestCase {
    /// SIGKILL at random moments while several threads log shaped records through a ring of a few
    /// chunks: lossless with the archiver, overwrite with it, overwrite without. After every kill
    /// (before and after the next writer's recovery) the bundle verifies: no record altered or
    /// twice, every record the child reported committed is there (lossless) or accounted for as
    /// overwritten (overwrite), and no failure issue. `LOGBOOK_SOAK_CYCLES` sets the kills per
    /// configuration (CI runs a few; soak runs thousands).
    func testSigkillSoakWithVaryingRecordsThroughTinyRings() throws {
        let cycles = Int(ProcessInfo.processInfo.environment["LOGBOOK_SOAK_CYCLES"] ?? "") ?? 8
        struct Configuration { let name: String; let policy: UInt32; let archive: UInt64; let chunks: Int; let threads: Int32 }
        let configurations = [
            Configuration(name: "lossless+archiver", policy: LB_WRAP_LOSSLESS.rawValue, archive: 64 << 10, chunks: 4, threads: 4),
            // 1 MiB files take milliseconds to compress: kills land during compression too.
            Configuration(name: "lossless+archiver, 1 MiB files", policy: LB_WRAP_LOSSLESS.rawValue, archive: 1 << 20, chunks: 4, threads: 3),
            Configuration(name: "overwrite+archiver", policy: LB_WRAP_OVERWRITE.rawValue, archive: 64 << 10, chunks: 8, threads: 3),
            Configuration(name: "overwrite", policy: LB_WRAP_OVERWRITE.rawValue, archive: 0, chunks: 8, threads: 2),
        ]
        var generator = SplitMix64(state: 20261123)
        for configuration in configurations {
            let path = makeTemporaryDirectory(self) + "/soak.logbook"
            var reported = Set<UInt64>()
            var next: UInt64 = 0
            for cycle in 0..<cycles {
                let first = next
                let child = ReportingChild(
                    path: path, threads: Int(configuration.threads), firstSequence: first, chunkSize: 4096,
                    capacity: UInt64(configuration.chunks * 4096), policy: lb_wrap_policy(configuration.policy),
                    archiveFileSize: configuration.archive)
                XCTAssertGreaterThan(child.pid, 0)
                if cycle % 5 == 4 {
                    // Killed while opening (creation, recovery) or soon after.
                    child.run(forNanoseconds: UInt64.random(in: 0...5_000_000, using: &generator))
                } else {
                    // Killed after a random number of records (the rings hold 4 to 8 chunks of
                    // 4 KiB, tens of records each: every cycle wraps them many times).
                    let records = Int.random(in: 50...4000, using: &generator)
                    XCTAssertTrue(child.waitForReports(atLeast: records),
                                  "\(configuration.name) cycle \(cycle): the child ended or hung before \(records) records")
                }
                let status = child.kill()
                XCTAssertEqual(status & 0x7f, SIGKILL, "\(configuration.name) cycle \(cycle): status \(status)")
                reported.formUnion(child.reports)
                next = child.nextFirstSequence(after: first)
                guard FileManager.default.fileExists(atPath: path + "/ring") else { continue }
                try checkSoak(path, configuration.name + " cycle \(cycle)", reported: reported,
                              lossless: configuration.policy == LB_WRAP_LOSSLESS.rawValue)
            }
            // The next writer recovers; a clean close completes everything.
            let bundle = try LogBundle(path: path, wrapPolicy: .lossless,
                                       archive: configuration.archive > 0 ? ArchiveOptions(maxFiles: nil, quota: nil) : nil)
            try bundle.close()
            try checkSoak(path, configuration.name + " after recovery", reported: reported,
                          lossless: configuration.policy == LB_WRAP_LOSSLESS.rawValue)
            XCTAssertGreaterThan(reported.count, cycles * 20, configuration.name)
        }
    }

    func checkSoak(_ path: String, _ name: String, reported: Set<UInt64>, lossless: Bool) throws {
        let reader = try LogReader(path: path)
        var found = Set<UInt64>()
        var foreign = 0, duplicates = 0
        try reader.scan { entry in
            guard let (thread, sequence) = ShapedRecord.identify(entry, chunkSize: 4096) else { foreign += 1; return }
            if !found.insert(UInt64(thread) << 48 | sequence).inserted { duplicates += 1 }
        }
        let summary = try reader.verify()
        XCTAssertEqual(foreign, 0, "\(name): records altered or mixed")
        XCTAssertEqual(duplicates, 0, name)
        XCTAssertEqual(reader.issues.filter(\.isFailure).map(\.description), [], name)
        XCTAssertEqual(summary.recordsLost, 0, name)
        if lossless {
            let missing = reported.subtracting(found)
            XCTAssertEqual(missing.count, 0, "\(name): \(missing.count) committed records missing")
        }
        // The streaming read of the same files finds the same records, in time order.
        let streamer = try LogReader(path: path)
        var streamed = Set<UInt64>()
        var streamedForeign = 0, outOfOrder = 0
        var last = Int64.min
        try streamer.stream { record in
            if record.wallNanoseconds < last { outOfOrder += 1 }
            last = record.wallNanoseconds
            guard let (thread, sequence) = ShapedRecord.identify(record.entry, chunkSize: 4096) else {
                streamedForeign += 1
                return
            }
            streamed.insert(UInt64(thread) << 48 | sequence)
        }
        XCTAssertEqual(streamedForeign, 0, "\(name): streamed records altered or mixed")
        XCTAssertEqual(outOfOrder, 0, "\(name): streamed records out of time order")
        XCTAssertTrue(streamed == found, "\(name): streaming read \(streamed.count) records, holding read \(found.count)")
    }
}
