import Foundation
import LogbookTestKit
import XCTest
import Logbook

/// A reader following a live writer (`readNew()` in a loop, as `logbook show --follow` and
/// `logbook export --follow` do) through a small lossless ring whose chunks are archived and their
/// slots reused while it reads: every record once, with its value, also records larger than a
/// chunk (stored as fragments across chunks), and no issue. Found by the exporter's follow test:
/// a chunk archived and overwritten between the listing of the archive files and that of the
/// ring was missed by both, and the record whose first fragment it held was reported torn.
final class FollowerConcurrencyTests: XCTestCase {
    func testAFollowerOfALosslessRingWithArchivingReadsEveryRecordOnce() throws {
        for _ in 0..<3 {
            let dir = makeTemporaryDirectory(self)
            let bundle = try LogBundle(path: dir + "/live.logbook", capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                       losslessWaitMilliseconds: 30_000,
                                       archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil))
            let log = try bundle.logger("live")
            let perThread = 1500
            let sizes = [0, 40, 700, 3000, 5000, 9000]
            @Sendable func text(_ thread: Int, _ i: Int) -> String {
                "record \(thread)-\(i) " + String(repeating: "v", count: sizes[(i * 7 + thread) % sizes.count])
            }
            let threads = (0..<3).map { thread in
                Thread {
                    for i in 0..<perThread {
                        log.info("\(text(thread, i))", metadata: ["thread": .init(thread)])
                        if i % 300 == 0 { usleep(20_000) }
                    }
                }
            }
            let reader = try LogReader(path: dir + "/live.logbook")
            var seen: [String] = []
            threads.forEach { $0.start() }
            while threads.contains(where: { !$0.isFinished }) {
                seen += try reader.readNew().map(\.message)
                usleep(5_000)
            }
            try bundle.flush()
            try bundle.syncArchive()
            seen += try reader.readNew().map(\.message)
            try bundle.close()
            seen += try reader.readNew().map(\.message)
            var expected: [String] = []
            for thread in 0..<3 { for i in 0..<perThread { expected.append(text(thread, i)) } }
            XCTAssertEqual(seen.count, expected.count, "each once")
            XCTAssertTrue(Set(seen) == Set(expected), "missing: \(Set(expected).subtracting(seen).map { $0.prefix(24) })")
            XCTAssertEqual(reader.issues.map(\.description), [])
            XCTAssertGreaterThan(try FileManager.default.contentsOfDirectory(atPath: dir + "/live.logbook/archive").count, 5)
            let summary = try reader.verify()
            XCTAssertEqual(summary.recordsLost, 0)
            XCTAssertEqual(summary.recordsExpected, UInt64(expected.count))
        }
    }

    /// `verify` on a reader that followed a live writer with `stream`, through a lossless
    /// archived ring and an overwrite ring (with and without the archiver): it expected more
    /// records than were written (chunks read while active and sealed since were counted twice),
    /// and blamed the ring header for records the follower read before the ring overwrote them.
    func testVerifyAfterFollowingAccountsExactly() throws {
        struct Case { let policy: WrapPolicy; let archiving: Bool }
        for configuration in [Case(policy: .lossless, archiving: true), Case(policy: .overwrite, archiving: false),
                              Case(policy: .overwrite, archiving: true)] {
            let name = "\(configuration.policy) archiving \(configuration.archiving)"
            let dir = makeTemporaryDirectory(self)
            let bundle = try LogBundle(
                path: dir + "/live.logbook", capacity: 16 << 10, chunkSize: 4096, wrapPolicy: configuration.policy,
                losslessWaitMilliseconds: 30_000,
                archive: configuration.archiving ? ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil) : nil)
            let log = try bundle.logger("live")
            let threads = (0..<4).map { thread in
                Thread {
                    for i in 0..<5_000 {
                        log.info("record \(thread)-\(i) \(String(repeating: "v", count: (i * 13 + thread) % 200))")
                        if i % 1_000 == 0 { usleep(5_000) }
                    }
                }
            }
            let reader = try LogReader(path: dir + "/live.logbook")
            var seen = 0
            try reader.stream { _ in seen += 1 }  // the first read: overwritten records count from here
            threads.forEach { $0.start() }
            while threads.contains(where: { !$0.isFinished }) {
                try reader.stream { _ in seen += 1 }
                usleep(2_000)
            }
            try bundle.close()
            try reader.stream { _ in seen += 1 }
            let summary = try reader.verify()
            XCTAssertEqual(reader.issues.filter(\.isFailure).map(\.description), [], name)
            XCTAssertEqual(summary.recordsLost, 0, name)
            if configuration.policy == .lossless {
                XCTAssertEqual(seen, 20_000, name)
            } else {
                // Records are read, overwritten before they could be read, or dropped when logged
                // (a small overwrite ring whose chunks wait for the archiver can be full).
                XCTAssertEqual(UInt64(seen) + reader.overwrittenRecords + summary.recordsDropped, 20_000, name)
            }
        }
    }
}
