import CLogbook
import CLogbookArchive
import CLogbookTestSupport
import Foundation
import LogbookTestKit
import Synchronization
import XCTest
@testable import Logbook

/// The archiver while threads log: files rolled by size (io_uring and pwrite) and by age,
/// retention by count and quota, a lossless burst far larger than the ring, a clean close, a
/// custom directory.
final class ArchiveConcurrencyTests: XCTestCase, ArchiveTestCase {
    /// The back-end this machine should pick: io_uring unless the kernel disables it.
    var expectedDefaultBackend: String {
        let disabled = (try? String(contentsOfFile: "/proc/sys/kernel/io_uring_disabled", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return disabled == nil || disabled == "0" ? "io_uring" : "pwrite"
    }

    /// Files roll before they would pass maxFileSize; each complete file is announced once, in
    /// order, decodes on its own, and the bundle reads every record once (archive + ring).
    func rollBySize(forcePwrite: Bool, compressed: Bool) throws {
        let path = makeTemporaryDirectory(self) + "/size.logbook"
        let rolled = Locked<[ArchivedFile]>([])
        let options = ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil,
                                     compressionLevel: compressed ? 1 : nil, forcePwrite: forcePwrite,
                                     onFileRolled: { file in rolled.withLock { $0.append(file) } })
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000, archive: options)
        XCTAssertEqual(bundle.archiveStats?.backend.rawValue, forcePwrite ? "pwrite" : expectedDefaultBackend)
        let log = try bundle.logger("size")
        let count = 20_000
        for i in 0..<count { log.info("record \(i) of \(count)") }
        try bundle.rollArchive()
        let stats = try XCTUnwrap(bundle.archiveStats)
        try bundle.close()

        let directory = path + "/archive"
        let files = rolled.withLock { $0 }
        XCTAssertGreaterThan(files.count, 5)
        if compressed {
            // All together: the last file rolled can hold a chunk or two, whose fixed frames and
            // zstd's own overhead weigh more than their records.
            let bytes = files.reduce(UInt64(0)) { $0 + $1.bytes }
            let uncompressed = files.reduce(UInt64(0)) { $0 + $1.uncompressedBytes }
            XCTAssertLessThan(bytes * 3, uncompressed, "compressed at least 3x")
        }
        XCTAssertEqual(files.map(\.number), Array(1...UInt64(files.count)))
        XCTAssertEqual(stats.filesRolled, UInt64(files.count))
        XCTAssertEqual(stats.lastError, 0)
        var total = 0
        for file in files {
            XCTAssertTrue(file.path.hasSuffix(compressed ? ".lba.zst" : ".lba"), file.path)
            XCTAssertEqual(file.isCompressed, compressed)
            XCTAssertLessThanOrEqual(file.uncompressedBytes, 64 << 10)
            XCTAssertEqual(UInt64(try size(file.path)), file.bytes)
            // A single file decodes on its own: its meta entries travel with it.
            let reader = try LogReader(path: file.path)
            let entries = try reader.readAll()
            XCTAssertEqual(reader.issues.map(\.description), [])
            XCTAssertTrue(entries.allSatisfy { $0.logger == "size" && $0.message.hasPrefix("record ") })
            total += entries.count
        }
        XCTAssertEqual(total, count, "every record is in exactly one rolled file")
        let (entries, issues) = try readBundle(path)
        XCTAssertEqual(issues.map(\.description), [])
        XCTAssertEqual(entries.map(\.message), (0..<count).map { "record \($0) of \(count)" })
        let (fromDirectory, _) = try readBundle(directory)
        XCTAssertEqual(fromDirectory.count, count)
    }

    func testRollsBySizeWithIoUring() throws { try rollBySize(forcePwrite: false, compressed: true) }

    func testRollsBySizeWithPwriteFallback() throws { try rollBySize(forcePwrite: true, compressed: false) }

    /// Age rolling follows the injected clock.
    func testRollsByAge() throws {
        let path = makeTemporaryDirectory(self) + "/age.logbook"
        let now = Atomic<Int64>(1_000_000_000_000)
        let rolled = Locked<[UInt64]>([])
        let options = ArchiveOptions(rollInterval: .seconds(60), onFileRolled: { file in rolled.withLock { $0.append(file.number) } },
                                     clock: { now.load(ordering: .relaxed) })
        let bundle = try LogBundle(path: path, archive: options)
        let log = try bundle.logger("age")
        log.info("first hour")
        try bundle.syncArchive()
        XCTAssertEqual(rolled.withLock { $0 }, [], "a young file does not roll")
        now.add(61_000_000_000, ordering: .relaxed)
        // The pass that completes the first sync sees the age; the second sync waits for it.
        try bundle.syncArchive()
        try bundle.syncArchive()
        // Announced once compressed, on the compression thread (at idle priority: nearly starved
        // on a busy machine). A roll waits for it, lending it a normal priority; the file being
        // written holds nothing, so the roll completes no file of its own.
        try bundle.rollArchive()
        XCTAssertEqual(rolled.withLock { $0 }, [1])
        log.info("second hour")
        try bundle.syncArchive()
        now.add(30_000_000_000, ordering: .relaxed)
        try bundle.syncArchive()
        try bundle.syncArchive()
        XCTAssertEqual(rolled.withLock { $0 }, [1], "the new file counts its age from its own start")
        try bundle.close()
        XCTAssertEqual(rolled.withLock { $0 }, [1, 2], "a clean close completes the file being written")
        XCTAssertEqual(try archiveNames(path + "/archive"), ["archive-0000000001.lba.zst", "archive-0000000002.lba.zst"])
        XCTAssertEqual(try readBundle(path).entries.map(\.message), ["first hour", "second hour"])
    }

    /// Retention: the oldest complete files go first, by count and by quota; the file being
    /// written is never deleted.
    func testKeepsCountAndQuota() throws {
        let path = makeTemporaryDirectory(self) + "/retention.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: 3, quota: nil))
        let log = try bundle.logger("count")
        for round in 0..<6 {
            for i in 0..<500 { log.info("round \(round) record \(i)") }
            try bundle.rollArchive()
        }
        XCTAssertEqual(bundle.archiveStats?.filesDeleted, 3)
        try bundle.close()
        XCTAssertEqual(try archiveNames(path + "/archive"),
                       ["archive-0000000004.lba.zst", "archive-0000000005.lba.zst", "archive-0000000006.lba.zst"])
        let rounds = Set(try readBundle(path + "/archive").entries.map { $0.message.split(separator: " ")[1] })
        XCTAssertEqual(rounds, ["3", "4", "5"])

        // Quota: files of ~64 KiB under a 200 KiB quota, the current one counted (uncompressed
        // files: see testQuotaCountsCompressedBytes).
        let quotaPath = makeTemporaryDirectory(self) + "/quota.logbook"
        let quota = 200 << 10
        // No idle sealing: the chunks (and so where files roll) are the same on every machine.
        let quotaBundle = try LogBundle(path: quotaPath, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                        idleSealMilliseconds: 0, losslessWaitMilliseconds: 30_000,
                                        archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: quota,
                                                                compressionLevel: nil))
        let quotaLog = try quotaBundle.logger("quota")
        for i in 0..<40_000 {
            quotaLog.info("quota record \(i)")
            if i % 5000 == 4999 {
                try quotaBundle.syncArchive()
                let names = try archiveNames(quotaPath + "/archive")
                let bytes = try names.map { try size(quotaPath + "/archive/" + $0) }.reduce(0, +)
                XCTAssertLessThanOrEqual(bytes, quota, "\(names)")
                XCTAssertEqual(names.filter { $0.hasSuffix(".writing") }.count, 1)
            }
        }
        XCTAssertGreaterThan(quotaBundle.archiveStats?.filesDeleted ?? 0, 0)
        try quotaBundle.close()
        let kept = try readBundle(quotaPath + "/archive")
        XCTAssertEqual(kept.issues.map(\.description), [])
        // What is kept is the newest records, contiguous up to the last one.
        let numbers = kept.entries.map { Int($0.message.split(separator: " ")[2])! }
        XCTAssertEqual(numbers, Array(numbers.first!...39_999))
    }

    /// The issue's burst: 2 threads × 1,000,000 messages through a 1 MiB lossless ring; every
    /// record is readable afterwards, once.
    func testLosslessBurstFarLargerThanTheRing() throws {
        let path = makeTemporaryDirectory(self) + "/burst.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 64 << 10, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 60_000,
                                   archive: ArchiveOptions(maxFiles: nil, quota: nil))
        let log = try bundle.logger("burst")
        let perThread = 1_000_000
        DispatchQueue.concurrentPerform(iterations: 2) { t in
            for i in 0..<perThread { log.info("thread \(t) message \(i)") }
        }
        let counters = bundle.counters
        XCTAssertEqual(counters.dropped, 0, "\(counters.drops)")
        XCTAssertGreaterThan(counters.chunksReused, 100, "the ring wrapped many times")
        try bundle.close()

        let reader = try LogReader(path: path)
        var seen = [[Bool]](repeating: [Bool](repeating: false, count: perThread), count: 2)
        var count = 0, duplicates = 0
        try reader.scan { entry in
            count += 1
            guard case .signed(let t, _)? = entry.arguments.first, case .signed(let i, _)? = entry.arguments.last else { return }
            if seen[Int(t)][Int(i)] { duplicates += 1 }
            seen[Int(t)][Int(i)] = true
        }
        XCTAssertEqual(reader.issues.map(\.description), [])
        XCTAssertEqual(count, 2 * perThread)
        XCTAssertEqual(duplicates, 0)
        XCTAssertTrue(seen.allSatisfy { $0.allSatisfy { $0 } })
    }

    /// A clean close completes the file being written (END frame, fsync, rename, onFileRolled),
    /// so that an uploader gets every record of a process that ended cleanly; reopening starts a
    /// new file and reconciles the ring with the files: no record twice, none lost, no issue.
    func testCleanCloseCompletesTheFileAndReopenAddsNoDuplicates() throws {
        let path = makeTemporaryDirectory(self) + "/reopen.logbook"
        let rolled = Locked<[ArchivedFile]>([])
        for session in 0..<3 {
            let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                       losslessWaitMilliseconds: 30_000,
                                       archive: ArchiveOptions(onFileRolled: { file in rolled.withLock { $0.append(file) } }))
            let log = try bundle.logger("reopen")
            for i in 0..<3000 { log.info("session \(session) record \(i)") }
            try bundle.close()
            XCTAssertEqual(rolled.withLock { $0.count }, session + 1, "close announces the file it completed")
        }
        XCTAssertEqual(try archiveNames(path + "/archive"),
                       ["archive-0000000001.lba.zst", "archive-0000000002.lba.zst", "archive-0000000003.lba.zst"])
        XCTAssertEqual(rolled.withLock { $0.map(\.records) }, [3000, 3000, 3000])
        let reader = try LogReader(path: path + "/archive")
        let entries = try reader.readAll()
        XCTAssertEqual(reader.issues.map(\.description), [])
        XCTAssertEqual(entries.count, 9000)
        let bundleReader = try LogReader(path: path)
        XCTAssertEqual(try bundleReader.readAll().count, 9000)
        let summary = try bundleReader.verify()
        XCTAssertEqual(bundleReader.issues.map(\.description), [])
        XCTAssertEqual(summary.recordsExpected, 9000)
        XCTAssertEqual(summary.recordsLost, 0)
    }

    /// A custom directory is linked from the bundle, so readers of the bundle find it.
    func testCustomDirectoryIsFoundThroughTheBundle() throws {
        let root = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: root + "/app.logbook", archive: ArchiveOptions(directory: root + "/elsewhere"))
        try bundle.logger("custom").info("kept elsewhere")
        try bundle.rollArchive()
        try bundle.close()
        XCTAssertEqual(try archiveNames(root + "/elsewhere"), ["archive-0000000001.lba.zst"])
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: root + "/app.logbook/archive"),
                       URL(fileURLWithPath: root + "/elsewhere").resolvingSymlinksInPath().path)
        XCTAssertEqual(try readBundle(root + "/elsewhere").entries.map(\.message), ["kept elsewhere"])
    }
}
