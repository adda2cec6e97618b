import CLogbook
import CLogbookArchive
import CLogbookTestSupport
import Foundation
import XCTest
@testable import Logbook

/// Every record written is read back once, with its values: shaped records of varying size
/// (short and long strings, metadata, chunk-sized and fragmented records) from many threads,
/// through small rings, lossless and overwrite, with and without the archiver.
final class IntegrityTests: XCTestCase {
    /// Reads `path` with the C reader and checks every entry against the shaped records.
    func checkShaped(_ path: String, chunkSize: Int, threads: Int, perThread: Int, dropped: [UInt8]? = nil) throws
        -> lb_test_check
    {
        var check = lb_test_check()
        let rc = lb_test_check_shaped_bundle(path, UInt32(chunkSize), UInt32(threads), UInt64(perThread), dropped, &check)
        if rc != 0 { throw LogbookError(operation: "lb_test_check_shaped_bundle", path: path, errno: -rc) }
        return check
    }

    /// The issue's reproduction: 4 threads through a 1 MiB lossless archived ring. A record begun
    /// at the end of a chunk was copied to the next chunk only after the old chunk had been
    /// sealed, so the archiver could persist it and another thread reuse it in between: records
    /// came back with another record's header or arguments, or not at all.
    func testLosslessArchivedRingKeepsVaryingRecordsIntact() throws {
        let path = makeTemporaryDirectory(self) + "/lossless.logbook"
        let chunkSize = 64 << 10
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: chunkSize, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 60_000, archive: ArchiveOptions(maxFiles: nil, quota: nil))
        let log = try bundle.logger("integrity")
        let threads = 4, perThread = 60_000
        let failed = lb_test_log_shaped_threads(log.cLogger, UInt32(threads), UInt64(perThread), UInt32(chunkSize), nil)
        XCTAssertEqual(failed, 0)
        XCTAssertEqual(bundle.counters.dropped, 0)
        XCTAssertGreaterThan(bundle.counters.chunksReused, 50, "the ring wrapped")
        try bundle.close()

        let check = try checkShaped(path, chunkSize: chunkSize, threads: threads, perThread: perThread)
        XCTAssertEqual(check.foreign, 0, "records altered or mixed with another record's bytes")
        XCTAssertEqual(check.duplicates, 0)
        XCTAssertEqual(check.missing, 0, "records lost")
        XCTAssertEqual(check.issues, 0)
        XCTAssertEqual(check.entries, threads * perThread)
    }
}
