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
