import CLogbook
import Foundation
import LogbookTestKit
import Synchronization
import XCTest
@testable import Logbook

/// Compressed archive files (`archive-N.lba.zst`): read like plain ones, record for record; every
/// kind of damage to one (a data frame, the listing, the seek table, a cut) is reported with the
/// records it cost and the rest is read; the states a crash can leave (a partial `.zst.writing`, a
/// `.lba` beside its `.zst`) are read once and cleaned up by the next open; plain files of an
/// earlier run are compressed; the quota counts bytes on disk.
/// Those of its tests that CI also runs under ThreadSanitizer are in `CompressedArchiveConcurrencyTests`.
final class CompressedArchiveTests: XCTestCase, CompressedArchiveTestCase {
    /// A flipped byte in one data frame: that frame's chunks are reported with their record
    /// count, every other record is read, and verify accounts for all of them.
    func testDamagedDataFrameCostsOnlyItsRecordsAndSaysHowMany() throws {
        let path = try makeBundle()
        let file = path + "/archive/" + (try archiveNames(path))[0]
        let frames = try layout(file).frames
        XCTAssertGreaterThanOrEqual(frames.count, 3)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
        try handle.seek(toOffset: UInt64(frames[1].offset + frames[1].length / 2))
        let byte = try handle.read(upToCount: 1)![0]
        try handle.seek(toOffset: UInt64(frames[1].offset + frames[1].length / 2))
        handle.write(Data([byte ^ 0x5A]))
        try handle.close()

        let (messages, issues, summary) = try readAll(path)
        let summaryValue = try XCTUnwrap(summary)
        XCTAssertTrue(issues.contains { $0.description.contains("data frame 1") && $0.description.contains("archive-0000000001.lba.zst") },
                      issues.map(\.description).joined(separator: "\n"))
        let lost = issues.map(\.records).reduce(0, +)
        XCTAssertGreaterThan(lost, 1000, "a 1 MiB frame holds thousands of records")
        XCTAssertEqual(UInt64(messages.count) + lost, 60_000, "every record read or counted lost")
        XCTAssertEqual(summaryValue.recordsExpected, 60_000)
        XCTAssertEqual(summaryValue.recordsLost, 0, "the issues account for every record not read")
        // What was read is intact and in order.
        let all = (0..<60_000).map(message)
        var cursor = all.startIndex
        for m in messages {
            guard let at = all[cursor...].firstIndex(of: m) else { return XCTFail("record altered or out of order: \(m.prefix(40))") }
            cursor = at + 1
        }
        let verify = try runProgram(XCTUnwrap(logbookExecutable()), ["verify", path])
        XCTAssertEqual(verify.status, 1, verify.output)
    }

    /// A damaged seek table or footer: said, and every record is still read (the data frames are
    /// found by walking them). A damaged listing: said, and every record read.
    func testDamagedSeekTableOrListingLosesNothing() throws {
        for part in ["footer", "table", "listing", "header frame", "header copy", "listing head"] {
            let path = try makeBundle(records: 20_000)
            let file = path + "/archive/archive-0000000001.lba.zst"
            let l = try layout(file)
            let at = switch part {
            case "footer": l.size - 10
            case "table": l.tableOffset + 5
            case "listing": l.listingOffset + 20
            case "header frame": 4
            case "header copy": 8 + 32
            default: l.listingOffset + 1
            }
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
            try handle.seek(toOffset: UInt64(at))
            let byte = try handle.read(upToCount: 1)![0]
            try handle.seek(toOffset: UInt64(at))
            handle.write(Data([byte ^ 0xFF]))
            try handle.close()
            let (messages, issues, summary) = try readAll(path)
            XCTAssertEqual(messages, (0..<20_000).map(message), part)
            XCTAssertEqual(summary?.recordsLost, 0, part)
            let word = part == "listing" ? "listing" : part.hasPrefix("header") ? "header frame"
                : part == "listing head" ? "skippable frame head" : "seek table"
            XCTAssertTrue(issues.contains { $0.description.contains(word) }, "\(part): \(issues.map(\.description))")
        }
    }

    /// A footer crafted to pass its own CRC with offsets that wrap around and a count of 2^32 - 1
    /// frames: refused (no sum wraps, no allocation sized by it), reported, and every record read
    /// by walking the data frames.
    func testCraftedFooterIsRefusedWithoutWrappingOrHugeAllocations() throws {
        let path = try makeBundle(records: 20_000)
        let file = path + "/archive/archive-0000000001.lba.zst"
        var data = try Data(contentsOf: URL(fileURLWithPath: file))
        let footer = data.count - 64
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { data.replaceSubrange(footer + offset..<footer + offset + $0.count, with: $0) }
        }
        put(UInt64.max - 1000, at: 32)  // table_offset
        put(UInt32.max, at: 40)         // frame_count
        put(UInt64.max - 5000, at: 16)  // listing_offset
        let crc = data[footer..<footer + 60].withUnsafeBytes { lb_crc32c(0, $0.baseAddress, 60) }
        put(crc, at: 60)
        try data.write(to: URL(fileURLWithPath: file))
        let (messages, issues, summary) = try readAll(path)
        XCTAssertEqual(messages, (0..<20_000).map(message))
        XCTAssertEqual(summary?.recordsLost, 0)
        XCTAssertTrue(issues.contains { $0.description.contains("seek table") }, "\(issues.map(\.description))")
    }

    /// A compressed file cut short: the frames before the cut are read, the rest counted lost.
    func testTruncatedCompressedFileCountsWhatItLost() throws {
        let path = try makeBundle()
        let file = path + "/archive/archive-0000000001.lba.zst"
        let l = try layout(file)
        XCTAssertEqual(truncate(file, off_t(l.frames[2].offset + 100)), 0)
        let (messages, issues, summary) = try readAll(path)
        let summaryValue = try XCTUnwrap(summary)
        XCTAssertFalse(issues.isEmpty)
        XCTAssertGreaterThan(messages.count, 5000, "the first two frames are read")
        XCTAssertLessThan(messages.count, 60_000)
        XCTAssertEqual(summaryValue.recordsExpected, 60_000)
        XCTAssertEqual(UInt64(messages.count) + summaryValue.recordsUnreadable + summaryValue.recordsLost, 60_000)
        XCTAssertTrue(issues.contains { $0.description.contains("archive-0000000001.lba.zst") }, "\(issues.map(\.description))")
    }

    /// Replaced by garbage, a FIFO or a symlink, or deleted: reported, the other files read.
    func testReplacedOrDeletedCompressedFileIsReported() throws {
        for replacement in ["garbage", "fifo", "symlink", "deleted", "empty"] {
            let path = try makeBundle(records: 30_000, maxFileSize: 1 << 20)
            let names = try archiveNames(path)
            XCTAssertGreaterThan(names.count, 3)
            let victim = path + "/archive/" + names[1]
            let records = try readAll(victim).messages.count
            try FileManager.default.removeItem(atPath: victim)
            switch replacement {
            case "garbage": try Data(repeating: 0x42, count: 300_000).write(to: URL(fileURLWithPath: victim))
            case "fifo": XCTAssertEqual(mkfifo(victim, 0o600), 0)
            case "symlink": try FileManager.default.createSymbolicLink(atPath: victim, withDestinationPath: path + "/archive/" + names[0])
            case "empty": FileManager.default.createFile(atPath: victim, contents: Data())
            default: break
            }
            let (messages, issues, summary) = try readAll(path)
            XCTAssertEqual(messages.count, 30_000 - records, replacement)
            // (A deleted file is named by its number: which of its names it had is gone with it.)
            let number = "archive file \(Int(names[1].dropFirst(8).prefix(10))!)"
            XCTAssertTrue(issues.contains { ($0.description.contains(names[1]) || $0.description.contains(number)) && $0.isFailure },
                          "\(replacement): \(issues.map(\.description))")
            XCTAssertEqual(Set(messages).count, messages.count, "\(replacement): nothing twice")
            XCTAssertEqual(summary?.recordsExpected, 30_000, replacement)
        }
    }

    /// A follower that opened a `.lba.writing` while it was being created keeps reading that file
    /// (the same bytes) after it was completed, compressed and its `.lba` deleted: what its name
    /// says now (`.lba.zst`) is not what the open file holds, and that is no damage. Found by
    /// `FollowerConcurrencyTests` in CI: "a plain archive file under a compressed file's name".
    func testAFileCompressedWhileAFollowerReadsItIsReadOnceWithoutAnIssue() throws {
        let path = try makeBundle(records: 20_000, maxFileSize: 1 << 20, level: nil)
        let plainName = try XCTUnwrap(try archiveNames(path).first)
        let plain = try Data(contentsOf: URL(fileURLWithPath: path + "/archive/" + plainName))
        let expected = try readAll(path + "/archive/" + plainName).messages
        XCTAssertGreaterThan(expected.count, 1000)
        // The same file compressed, as the archiver does for the files of an earlier run.
        try LogBundle(path: path, capacity: 1 << 20, chunkSize: 64 << 10, wrapPolicy: .lossless,
                      archive: ArchiveOptions(maxFileSize: 1 << 20, maxFiles: nil, quota: nil)).close()
        let compressed = try Data(contentsOf: URL(fileURLWithPath: path + "/archive/" + plainName + ".zst"))

        let directory = makeTemporaryDirectory(self)
        let writing = directory + "/" + plainName + ".writing"
        try plain.prefix(10).write(to: URL(fileURLWithPath: writing))  // shorter than its header
        let reader = try LogReader(path: directory)
        var seen = try reader.readNew().map(\.message)
        XCTAssertEqual(seen, [])
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: writing))
        try handle.seekToEnd()
        try handle.write(contentsOf: plain.dropFirst(10))
        try handle.close()
        XCTAssertEqual(rename(writing, directory + "/" + plainName), 0)
        try compressed.write(to: URL(fileURLWithPath: directory + "/" + plainName + ".zst"))
        try FileManager.default.removeItem(atPath: directory + "/" + plainName)
        seen += try reader.readNew().map(\.message)
        XCTAssertEqual(seen, expected)
        XCTAssertEqual(reader.issues.map(\.description), [])
        // A new reader opens the .lba.zst and reads the same.
        XCTAssertEqual(try readAll(directory).messages, expected)
        XCTAssertEqual(try readAll(directory).issues.map(\.description), [])
    }

    /// A roll returns once its file (and those before it) are announced, not once compression has
    /// caught up with a writer that keeps filling files (level 19 and retention: it hung, waiting
    /// for files completed after it, for as long as the writer ran).
    func testRollReturnsWhileAWriterKeepsFillingFiles() throws {
        let path = makeTemporaryDirectory(self) + "/busy.logbook"
        let rolled = Locked<[UInt64]>([])
        let bundle = try LogBundle(path: path, capacity: 128 << 10, chunkSize: 16 << 10, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 5000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: 3, quota: nil, compressionLevel: 19,
                                                           onFileRolled: { file in rolled.withLock { $0.append(file.number) } }))
        let log = try bundle.logger("busy")
        let stop = Atomic<Bool>(false)
        let logged = Atomic<Int>(0)
        let writer = Thread {
            var i = 0
            while !stop.load(ordering: .relaxed) {
                log.info("request \(i) path \(String(repeating: "p", count: (i * 37) % 700))")
                i += 1
                logged.store(i, ordering: .releasing)
            }
        }
        writer.start()
        let done = DispatchSemaphore(value: 0)
        let failure = Locked<String?>(nil)
        Thread {
            do {
                var seen = 0
                for _ in 0..<5 {
                    // A roll completes a file only when it holds something: each one waits for a
                    // record logged since the last (the writer thread may not have started yet).
                    while logged.load(ordering: .acquiring) == seen { usleep(100) }
                    seen = logged.load(ordering: .acquiring)
                    let before = bundle.archiveStats?.filesRolled ?? 0
                    try bundle.rollArchive()
                    let newest = rolled.withLock { $0.max() ?? 0 }
                    if newest < before + 1 { failure.withLock { $0 = "roll returned before its file was announced (\(newest) < \(before + 1))" } }
                }
            } catch { failure.withLock { $0 = "\(error)" } }
            done.signal()
        }.start()
        let finished = done.wait(timeout: .now() + 120) == .success
        stop.store(true, ordering: .relaxed)
        XCTAssertTrue(finished, "five rolls did not return within 2 minutes while a writer logged")
        if let failure = failure.withLock({ $0 }) { XCTFail(failure) }
        while !writer.isFinished { usleep(1000) }
        if finished { try bundle.close() }
    }

    /// Options: invalid levels are refused with the option named; negative (fast) levels work.
    func testCompressionLevels() throws {
        let dir = makeTemporaryDirectory(self)
        for level in [100, -10_000_000] {
            XCTAssertThrowsError(try LogBundle(path: dir + "/bad\(level).logbook", archive: ArchiveOptions(compressionLevel: level))) { error in
                XCTAssertTrue("\(error)".contains("compression level"), "\(error)")
            }
        }
        for level in [-5, 3, 19] {
            let path = try makeBundle(records: 5000, maxFileSize: 1 << 20, level: level)
            XCTAssertTrue(try archiveNames(path).allSatisfy { $0.hasSuffix(".lba.zst") })
            XCTAssertEqual(try readAll(path).messages, (0..<5000).map(message), "level \(level)")
        }
    }
}
