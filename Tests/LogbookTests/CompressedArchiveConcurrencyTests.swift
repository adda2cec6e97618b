import CLogbook
import Foundation
import LogbookTestKit
import Synchronization
import XCTest
@testable import Logbook

/// Compressed archive files written while threads log: every record once, announced by its final
/// name; what a crash leaves; the quota, also while compression is behind.
final class CompressedArchiveConcurrencyTests: XCTestCase, CompressedArchiveTestCase {
    func testCompressedFilesHoldEveryRecordOnceAndAreAnnouncedByTheirFinalName() throws {
        let rolled = Locked<[ArchivedFile]>([])
        let path = try makeBundle(rolled: rolled)
        let names = try archiveNames(path)
        XCTAssertGreaterThanOrEqual(names.count, 2)
        XCTAssertTrue(names.allSatisfy { $0.hasSuffix(".lba.zst") }, "\(names)")
        let files = rolled.withLock { $0 }
        XCTAssertEqual(files.map { ($0.path as NSString).lastPathComponent }, names, "each file announced once, by its final name")
        for file in files {
            let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as! NSNumber
            XCTAssertEqual(file.bytes, size.uint64Value)
            XCTAssertTrue(file.isCompressed)
            XCTAssertGreaterThan(file.uncompressedBytes, 3 * file.bytes)
            let frames = try layout(file.path).frames
            XCTAssertEqual(frames.map(\.uncompressed).reduce(0, +), Int(file.uncompressedBytes))
            XCTAssertTrue(frames.allSatisfy { $0.uncompressed <= 1 << 20 }, "frames of at most ~1 MiB")
            // One file on its own.
            let single = try readAll(file.path)
            XCTAssertEqual(single.issues.map(\.description), [])
            XCTAssertEqual(UInt64(single.messages.count), file.records)
        }
        let (messages, issues, summary) = try readAll(path)
        XCTAssertEqual(issues.map(\.description), [])
        XCTAssertEqual(messages, (0..<60_000).map(message))
        XCTAssertEqual(summary?.recordsExpected, 60_000)
        XCTAssertEqual(summary?.recordsLost, 0)
        // Streaming reads the same.
        var streamed: [String] = []
        try LogReader(path: path).stream { streamed.append($0.entry.message) }
        XCTAssertEqual(streamed, messages)
    }

    /// What a crash can leave: a `.lba.zst.writing` (compression cut short) and a `.lba` beside
    /// its `.lba.zst` (killed between the rename and the delete). Readers read each record once
    /// with no issue; the next open removes the leftovers.
    func testCrashLeftoversAreReadOnceAndCleanedUp() throws {
        let path = try makeBundle(records: 30_000, maxFileSize: 1 << 20, level: nil)
        let names = try archiveNames(path)
        XCTAssertTrue(names.allSatisfy { $0.hasSuffix(".lba") }, "\(names)")
        let keep = makeTemporaryDirectory(self)
        for name in names.prefix(2) { try FileManager.default.copyItem(atPath: path + "/archive/" + name, toPath: keep + "/" + name) }
        // Reopened with compression: the plain files of the earlier run are compressed and announced.
        let rolled = Locked<[ArchivedFile]>([])
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 64 << 10, wrapPolicy: .lossless,
                                   archive: ArchiveOptions(maxFileSize: 1 << 20, maxFiles: nil, quota: nil,
                                                           onFileRolled: { file in rolled.withLock { $0.append(file) } }))
        try bundle.close()
        XCTAssertEqual(try archiveNames(path), names.map { $0 + ".zst" })
        XCTAssertEqual(rolled.withLock { $0.count }, names.count)
        // The states a kill leaves, planted: the .lba back beside its .zst, a partial .zst.writing.
        try FileManager.default.copyItem(atPath: keep + "/" + names[0], toPath: path + "/archive/" + names[0])
        let partial = path + "/archive/" + names[1] + ".zst.writing"
        let zst = try Data(contentsOf: URL(fileURLWithPath: path + "/archive/" + names[1] + ".zst"))
        try zst.prefix(zst.count / 2).write(to: URL(fileURLWithPath: partial))
        let (messages, issues, summary) = try readAll(path)
        XCTAssertEqual(issues.map(\.description), [])
        XCTAssertEqual(messages, (0..<30_000).map(message))
        XCTAssertEqual(summary?.recordsLost, 0)
        // The next open keeps one copy of each.
        try LogBundle(path: path, capacity: 1 << 20, chunkSize: 64 << 10, wrapPolicy: .lossless,
                      archive: ArchiveOptions(maxFileSize: 1 << 20, maxFiles: nil, quota: nil)).close()
        XCTAssertEqual(try archiveNames(path), names.map { $0 + ".zst" })
        XCTAssertEqual(try readAll(path).messages.count, 30_000)
    }

    /// The quota counts bytes on disk: compressed, the same quota keeps several times the records.
    func testQuotaCountsCompressedBytes() throws {
        var kept: [Int] = []
        for level in [nil, 1] as [Int?] {
            let path = makeTemporaryDirectory(self) + "/quota.logbook"
            let quota = 256 << 10
            let bundle = try LogBundle(path: path, capacity: 256 << 10, chunkSize: 16 << 10, wrapPolicy: .lossless,
                                       losslessWaitMilliseconds: 30_000,
                                       archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: quota,
                                                               compressionLevel: level))
            let log = try bundle.logger("quota")
            // (Rolling waits for compression: files waiting for it count whole, so a compressor
            // far behind makes retention delete sooner.)
            for i in 0..<60_000 {
                log.info("\(message(i % 50))")
                if i % 150 == 149 { try bundle.rollArchive() }
            }
            try bundle.close()
            let names = try archiveNames(path)
            let bytes = try names.map {
                (try FileManager.default.attributesOfItem(atPath: path + "/archive/" + $0)[.size] as! NSNumber).intValue
            }.reduce(0, +)
            XCTAssertLessThanOrEqual(bytes, quota, "\(names)")
            let (messages, issues, _) = try readAll(path + "/archive")
            XCTAssertEqual(issues.filter(\.isFailure).map(\.description), [])
            kept.append(messages.count)
        }
        XCTAssertGreaterThan(kept[1], 3 * kept[0], "compressed, the quota holds several times the records: \(kept)")
    }

    /// Compression far behind (level 19, a writer at full speed): the quota still holds, because a
    /// file waiting for compression that must go is announced uncompressed and deleted; every file
    /// is announced exactly once.
    ///
    /// Behind on any machine: a spinning thread per core keeps the compressor, which runs at idle
    /// priority (SCHED_IDLE), from all but a sliver of CPU while the writer logs. (Without them, a
    /// fast core against a slow fsync let compression keep up.)
    func testQuotaHoldsWhileCompressionIsBehind() throws {
        let hogs = CPUHogs()
        defer { hogs.stop() }
        let path = makeTemporaryDirectory(self) + "/behind.logbook"
        let quota = 1 << 20, fileSize = 256 << 10
        let rolled = Locked<[ArchivedFile]>([])
        let bundle = try LogBundle(path: path, capacity: 256 << 10, chunkSize: 16 << 10, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: fileSize, maxFiles: nil, quota: quota, compressionLevel: 19,
                                                           onFileRolled: { file in rolled.withLock { $0.append(file) } }))
        let log = try bundle.logger("behind")
        var peak = 0
        for i in 0..<60_000 {
            log.info("\(message(i))")
            if i % 1000 == 999 {
                let names = try archiveNames(path)
                let bytes = names.compactMap { try? FileManager.default.attributesOfItem(atPath: path + "/archive/" + $0)[.size] as? NSNumber }
                    .map(\.intValue).reduce(0, +)
                peak = max(peak, bytes)
            }
        }
        hogs.stop()
        try bundle.close()
        // The quota, plus at most the file being compressed beside its partial copy.
        XCTAssertLessThanOrEqual(peak, quota + 2 * fileSize)
        let files = rolled.withLock { $0 }
        XCTAssertEqual(files.map(\.number), Array(1...UInt64(files.count)), "each file announced once, in order")
        XCTAssertTrue(files.contains { !$0.isCompressed }, "some were announced uncompressed to make room")
        let reader = try LogReader(path: path)
        var count = 0
        try reader.scan { _ in count += 1 }
        let summary = try reader.verify()
        XCTAssertEqual(reader.issues.filter(\.isFailure).map(\.description), [])
        XCTAssertEqual(UInt64(count) + summary.recordsRetired, 60_000)
    }
}
