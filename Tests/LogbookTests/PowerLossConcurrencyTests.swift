import CLogbook
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

/// Syncs while threads log: nothing logged before a sync is lost.
final class PowerLossConcurrencyTests: XCTestCase {
    /// Syncs from the interval thread and from a caller, while four threads log into a ring that
    /// wraps (overwrite) or waits for its archiver (lossless): every record is read back once or
    /// counted overwritten, and verify passes. Run under ThreadSanitizer in CI.
    func testSyncsWhileThreadsLogLoseNothing() throws {
        for policy in [WrapPolicy.overwrite, .lossless] {
            let path = makeTemporaryDirectory(self) + "/busy-\(policy).logbook"
            let archive: ArchiveOptions? = policy == .lossless
                ? ArchiveOptions(maxFileSize: 1 << 20, maxFiles: nil, quota: nil, compressionLevel: nil) : nil
            let bundle = try LogBundle(path: path, capacity: 256 << 10, chunkSize: 16 << 10, wrapPolicy: policy,
                                       losslessWaitMilliseconds: 60_000, archive: archive,
                                       durability: .interval(.milliseconds(1)))
            let log = try bundle.logger("busy")
            let perThread = 5_000
            let threads = (0..<4).map { t in
                Thread {
                    for i in 0..<perThread { log.info("thread \(t) record \(i) \(String(repeating: "b", count: i % 200))") }
                }
            }
            threads.forEach { $0.start() }
            for _ in 0..<50 { try bundle.sync() }
            while threads.contains(where: { !$0.isFinished }) { try bundle.sync() }
            try bundle.close()
            let reader = try LogReader(path: path)
            let messages = try reader.readAll().map(\.message)
            let summary = try reader.verify()
            XCTAssertEqual(Set(messages).count, messages.count, "no record twice")
            XCTAssertEqual(UInt64(messages.count) + summary.recordsOverwritten, UInt64(4 * perThread), "\(policy)")
            XCTAssertTrue(reader.issues.filter(\.isFailure).isEmpty, "\(reader.issues)")
        }
    }
}
