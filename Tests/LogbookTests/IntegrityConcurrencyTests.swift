import CLogbook
import CLogbookArchive
import CLogbookTestSupport
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

/// Shaped records from many threads, read back once each: every wrap policy with and without
/// the archiver, and a lossless archived ring.
final class IntegrityConcurrencyTests: XCTestCase {
    /// Reads `path` with the C reader twice, holding the entries (lb_reader_scan) and streaming
    /// them through the window (lb_reader_stream), and checks every entry against the shaped
    /// records: both reads must find the same, each in time order.
    func checkShaped(_ path: String, chunkSize: Int, threads: Int, perThread: Int, dropped: [UInt8]? = nil,
                     file: StaticString = #filePath, line: UInt = #line) throws -> lb_test_check
    {
        var check = lb_test_check()
        var rc = lb_test_check_shaped_bundle(path, UInt32(chunkSize), UInt32(threads), UInt64(perThread), dropped, &check)
        if rc != 0 { throw LogbookError(operation: "lb_test_check_shaped_bundle", path: path, errno: -rc) }
        var streamed = lb_test_check()
        rc = lb_test_check_shaped_stream(path, UInt32(chunkSize), UInt32(threads), UInt64(perThread), dropped, &streamed)
        if rc != 0 { throw LogbookError(operation: "lb_test_check_shaped_stream", path: path, errno: -rc) }
        func counts(_ c: lb_test_check) -> [Int] {
            [c.entries, c.foreign, c.duplicates, c.dropped_found, c.missing, c.issues, c.failures, c.scan_result]
        }
        XCTAssertEqual(counts(streamed), counts(check), "streaming and holding reads differ", file: file, line: line)
        XCTAssertEqual(check.out_of_order, 0, "held entries out of time order", file: file, line: line)
        XCTAssertEqual(streamed.out_of_order, 0, "streamed entries out of time order", file: file, line: line)
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

    /// Every combination that matters: lossless and overwrite, archiver on and off, 1, 4 and 8
    /// threads, a ring of 4 small chunks and one of 16. Each record committed is read back once
    /// with its values; each one not read back is accounted for: dropped when logged (counted by
    /// reason), overwritten by the overwrite policy (counted), or in an issue that says so.
    func testEveryRecordIsReadBackOnceOrAccountedFor() throws {
        struct Ring { let chunks: Int; let chunkSize: Int }
        for policy in [WrapPolicy.lossless, .overwrite] {
            for archiving in [true, false] {
                for threads in [1, 4, 8] {
                    for ring in [Ring(chunks: 4, chunkSize: 4096), Ring(chunks: 16, chunkSize: 16 << 10)] {
                        try checkConfiguration(policy: policy, archiving: archiving, threads: threads,
                                               chunks: ring.chunks, chunkSize: ring.chunkSize)
                    }
                }
            }
        }
    }

    func checkConfiguration(policy: WrapPolicy, archiving: Bool, threads: Int, chunks: Int, chunkSize: Int) throws {
        let name = "\(policy) archiver=\(archiving) compressed=\(archiving && threads != 4) threads=\(threads) ring=\(chunks)x\(chunkSize)"
        let path = makeTemporaryDirectory(self) + "/matrix.logbook"
        let perThread = 48_000 / threads
        let bundle = try LogBundle(
            path: path, capacity: chunks * chunkSize, chunkSize: chunkSize, wrapPolicy: policy,
            losslessWaitMilliseconds: 30_000,
            // Compressed archive files, but plain ones with 4 threads: both kinds in the matrix.
            archive: archiving ? ArchiveOptions(maxFileSize: 256 << 10, maxFiles: nil, quota: nil,
                                                compressionLevel: threads == 4 ? nil : 1) : nil)
        let log = try bundle.logger("matrix")
        var dropped = [UInt8](repeating: 0, count: threads * perThread)
        let failures = lb_test_log_shaped_threads(log.cLogger, UInt32(threads), UInt64(perThread), UInt32(chunkSize), &dropped)
        XCTAssertGreaterThanOrEqual(failures, 0, name)
        try bundle.close()
        let counters = try LogReader(path: path).info().counters
        XCTAssertEqual(counters.dropped, UInt64(failures), "\(name): every dropped record is counted")
        if policy == .lossless && archiving {
            XCTAssertEqual(failures, 0, "\(name): \(counters.drops)")
        }

        let check = try checkShaped(path, chunkSize: chunkSize, threads: threads, perThread: perThread, dropped: dropped)
        XCTAssertEqual(check.foreign, 0, "\(name): records altered or mixed with another's bytes")
        XCTAssertEqual(check.duplicates, 0, name)
        XCTAssertEqual(check.dropped_found, 0, "\(name): a record reported dropped was stored")
        let reader = try LogReader(path: path)
        var read = 0
        try reader.scan { _ in read += 1 }
        let summary = try reader.verify()
        let failuresFound = reader.issues.filter(\.isFailure)
        XCTAssertEqual(failuresFound.map(\.description), [], name)
        XCTAssertEqual(summary.recordsLost, 0, name)
        let unreadable = reader.issues.filter { $0.kind != .overwritten }.reduce(UInt64(0)) { $0 + $1.records }
        let committed = UInt64(threads * perThread) - UInt64(failures)
        XCTAssertEqual(UInt64(read) + summary.recordsOverwritten + unreadable, committed,
                       "\(name): \(read) read + \(summary.recordsOverwritten) overwritten + \(unreadable) in issues")
        if policy == .lossless {
            XCTAssertEqual(check.missing, 0, "\(name): a committed record is missing")
            XCTAssertEqual(summary.recordsOverwritten, 0, name)
        }
    }
}
