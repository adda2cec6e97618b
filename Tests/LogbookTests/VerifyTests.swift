import CLogbook
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

/// `verify` accounts for every record and file: whatever is deleted, truncated, zeroed, flipped or
/// replaced, it fails and says what and where, and the reader still reads the rest.
final class VerifyTests: XCTestCase {
    var logbook: String!

    override func setUpWithError() throws {
        logbook = logbookExecutable()
        XCTAssertNotNil(logbook, "`swift test` builds the logbook executable")
    }

    /// A lossless bundle with an archiver: 20,000 records through a 16-chunk ring into ~12 archive
    /// files of 64 KiB, closed cleanly (every file complete). Returns its path.
    func makeArchivedBundle(records: Int = 20_000, close: Bool = true) throws -> String {
        let path = makeTemporaryDirectory(self) + "/verify.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil, compressionLevel: nil))
        let log = try bundle.logger("verify")
        for i in 0..<records { log.info("request \(i) took \(Double(i % 100) / 10) ms path \(String(repeating: "p", count: i % 17))") }
        if close { try bundle.close() }
        return path
    }

    func archiveFiles(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path + "/archive").filter { $0.hasPrefix("archive-") }.sorted()
    }

    /// Reads everything and verifies: the entries, the issues and the summary.
    func verify(_ path: String) throws -> (entries: Int, issues: [LogIssue], summary: VerifySummary) {
        let reader = try LogReader(path: path)
        var count = 0
        try reader.scan { _ in count += 1 }
        let summary = try reader.verify()
        return (count, reader.issues, summary)
    }

    func testCleanArchivedBundleVerifiesWithExactCounts() throws {
        let path = try makeArchivedBundle()
        let (entries, issues, summary) = try verify(path)
        XCTAssertEqual(issues.map(\.description), [])
        XCTAssertEqual(entries, 20_000)
        XCTAssertEqual(summary.recordsExpected, 20_000)
        XCTAssertEqual(summary.recordsLost, 0)
        XCTAssertTrue(summary.accounted)
        XCTAssertGreaterThan(try archiveFiles(path).count, 5)
    }

    /// Files retention deleted are no gap: the ring header says what left, by file, claim and
    /// record count. Deleting a file retention kept is one.
    func testRetentionIsNotMissingButADeletedKeptFileIs() throws {
        let path = makeTemporaryDirectory(self) + "/retention.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: 3, quota: 160 << 10, compressionLevel: nil))
        let log = try bundle.logger("retention")
        for i in 0..<30_000 { log.info("record \(i) \(String(repeating: "r", count: i % 40))") }
        try bundle.close()
        let (entries, issues, summary) = try verify(path)
        XCTAssertEqual(issues.map(\.description), [])
        XCTAssertGreaterThan(summary.recordsRetired, 0)
        XCTAssertEqual(summary.recordsExpected, UInt64(entries))
        XCTAssertEqual(UInt64(entries) + summary.recordsRetired, 30_000)
        let files = try archiveFiles(path)
        XCTAssertLessThanOrEqual(files.count, 3)
        try FileManager.default.removeItem(atPath: path + "/archive/" + files[0])
        let (_, after, _) = try verify(path)
        XCTAssertTrue(after.contains { $0.kind == .missing && $0.file == files[0] }, "\(after)")
    }

    func testDeletedArchiveFileIsMissing() throws {
        let path = try makeArchivedBundle()
        let files = try archiveFiles(path)
        // One in the middle, and the oldest: retention did not delete them, so they must be there.
        for name in [files[3], files[0]] {
            try FileManager.default.removeItem(atPath: path + "/archive/" + name)
            let (entries, issues, summary) = try verify(path)
            XCTAssertLessThan(entries, 20_000)
            XCTAssertTrue(issues.contains { $0.kind == .missing && $0.file == name }, "\(issues)")
            XCTAssertEqual(summary.recordsLost, UInt64(20_000 - entries), "every missing record is counted")
            XCTAssertTrue(issues.contains { $0.isFailure })
        }
    }

    func testTruncatedCompleteArchiveFileFails() throws {
        let path = try makeArchivedBundle()
        let name = try archiveFiles(path)[2]
        let file = path + "/archive/" + name
        let size = try FileManager.default.attributesOfItem(atPath: file)[.size] as! Int
        // At a frame boundary (its END frame removed: 80 bytes) and in the middle of a frame.
        for cut in [size - 80, size / 2 + 3] {
            let copy = try makeCopy(of: path)
            try truncate(copy + "/archive/" + name, to: cut)
            let (_, issues, summary) = try verify(copy)
            XCTAssertTrue(issues.contains { ($0.kind == .truncated || $0.kind == .missing) && $0.file == name && $0.isFailure },
                          "cut \(cut): \(issues)")
            if cut == size - 80 {
                XCTAssertEqual(summary.recordsLost, 0, "only the END frame is gone: every record is read")
            } else {
                XCTAssertGreaterThan(summary.recordsLost, 0)
            }
        }
    }

    func testDeletedRingIsReportedNotReadAsAnArchiveDirectory() throws {
        let path = try makeArchivedBundle()
        try FileManager.default.removeItem(atPath: path + "/ring")
        let (entries, issues, _) = try verify(path)
        XCTAssertGreaterThan(entries, 0, "the archive files are still read")
        XCTAssertTrue(issues.contains { $0.kind == .missing && $0.file == "ring" }, "\(issues)")
    }

    func testDirectoryThatIsNoBundleIsRefused() throws {
        let empty = makeTemporaryDirectory(self) + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        XCTAssertThrowsError(try LogReader(path: empty)) { XCTAssertEqual(($0 as! LogbookError).errno, EPROTO) }
        FileManager.default.createFile(atPath: empty + "/notes.txt", contents: Data("hello".utf8))
        XCTAssertThrowsError(try LogReader(path: empty))
        if let logbook {
            let result = try runProgram(logbook, ["verify", empty])
            XCTAssertEqual(result.status, 1, result.output)
            XCTAssertTrue(result.output.contains("neither a Logbook bundle nor an archive"), result.output)
        }
    }

    /// 64 zeroed bytes inside a sealed chunk of the ring: the walk stops there, and the records
    /// after it are reported with their count from the chunk header.
    func testZeroedBytesInsideAChunkAreCountedAsUnreadable() throws {
        let path = makeTemporaryDirectory(self) + "/zeroed.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096)
        let log = try bundle.logger("zero")
        for i in 0..<300 { log.info("record \(i)") }
        try bundle.close()
        let clean = try readBundle(path).entries
        XCTAssertEqual(clean.count, 300)
        // The chunk of the 50th record; zero 64 bytes from that record on.
        let target = clean[50]
        let offset = 4096 + Int(target.chunkSequence % 16) * 4096 + Int(target.chunkOffset)
        let inChunk = clean.filter { $0.chunkSequence == target.chunkSequence && $0.chunkOffset >= target.chunkOffset }.count
        try patch(path + "/ring", at: offset, with: [UInt8](repeating: 0, count: 64))
        let (entries, issues, summary) = try verify(path)
        XCTAssertEqual(entries, 300 - inChunk)
        let issue = try XCTUnwrap(issues.first { $0.kind == .corrupt }, "\(issues)")
        XCTAssertEqual(issue.records, UInt64(inChunk), issue.description)
        XCTAssertEqual(issue.offset, UInt64(offset))
        XCTAssertEqual(summary.recordsLost, 0, "all accounted for by the issue")
        XCTAssertEqual(summary.recordsUnreadable, UInt64(inChunk))
    }

    /// One flipped bit in an archived record's value: the frame's CRC-32C catches it.
    func testFlippedBitInAnArchivedRecordFailsItsChecksum() throws {
        let path = makeTemporaryDirectory(self) + "/flip.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000, archive: ArchiveOptions(maxFiles: nil, quota: nil, compressionLevel: nil))
        let log = try bundle.logger("flip")
        for i in 0..<5000 { log.info("request \(2_000_000 + i)") }
        try bundle.close()
        let file = path + "/archive/" + (try archiveFiles(path)[0])
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
        // The value of "request 2000635": find its 8 bytes (tag 6 = Int, then the value).
        var needle: [UInt8] = [6]
        withUnsafeBytes(of: Int64(2_000_635).littleEndian) { needle += $0 }
        let at = try XCTUnwrap(indexOf(needle, in: bytes))
        bytes[at + 3] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        // Read the archive directory alone (the ring no longer holds that chunk either way).
        let reader = try LogReader(path: path + "/archive")
        _ = try reader.readAll()
        let issue = try XCTUnwrap(reader.issues.first { $0.kind == .corrupt }, "\(reader.issues)")
        XCTAssertTrue(issue.reason.contains("checksum"), issue.description)
        XCTAssertLessThanOrEqual(issue.offset, UInt64(at))
        XCTAssertGreaterThan(issue.offset + issue.length, UInt64(at))
        if let logbook {
            let result = try runProgram(logbook, ["verify", path + "/archive"])
            XCTAssertEqual(result.status, 1, result.output)
        }
    }

    /// One damaged byte in the ring header hides nothing: the archive files are read, and the
    /// ring's chunks too (with the archive files' geometry).
    func testDamagedRingHeaderStillReadsEverything() throws {
        let path = try makeArchivedBundle(records: 5000)
        try patch(path + "/ring", at: 17, with: [0xEE])
        let reader = try LogReader(path: path)
        let entries = try reader.readAll()
        XCTAssertEqual(entries.count, 5000)
        XCTAssertTrue(reader.issues.contains { $0.kind == .corrupt && $0.file == "ring" && $0.offset == 0 }, "\(reader.issues)")
        if let logbook {
            let show = try runProgram(logbook, ["show", path])
            XCTAssertEqual(show.output.split(separator: "\n").filter { $0.contains(" info ") }.count, 5000)
            XCTAssertTrue(show.output.contains("run `logbook verify"), "show says something is wrong")
            let verify = try runProgram(logbook, ["verify", path])
            XCTAssertEqual(verify.status, 1, verify.output)
        }
    }

    /// The file being written deleted (the writer was killed, so nothing completed it): the
    /// chunks it held that the ring no longer has are missing, by number of records.
    func testDeletedWritingFileIsMissing() throws {
        let path = makeTemporaryDirectory(self) + "/writing.logbook"
        // No idle sealing: the chunks (and so where files roll) are the same on every machine.
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   idleSealMilliseconds: 0, losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil, compressionLevel: nil))
        let log = try bundle.logger("w")
        for i in 0..<20_000 { log.info("record \(i)") }
        try bundle.syncArchive()
        // Copy the bundle as it is on disk while the writer is open (as after a kill).
        let copy = try makeCopy(of: path)
        try bundle.close()
        try? FileManager.default.removeItem(atPath: copy + "/lock")
        let writing = try XCTUnwrap(try archiveFiles(copy).first { $0.hasSuffix(".writing") })
        try FileManager.default.removeItem(atPath: copy + "/archive/" + writing)
        let (_, issues, _) = try verify(copy)
        XCTAssertTrue(issues.contains { $0.kind == .missing && $0.file == String(writing.dropLast(".writing".count)) },
                      "\(issues)")
    }

    /// An archive file of another bundle in the archive directory (a custom directory shared, a
    /// bundle re-created): its chunk sequences are not this ring's, so it is reported, not mixed in.
    func testArchiveFileOfAnotherBundleIsReportedNotMixedIn() throws {
        let path = try makeArchivedBundle(records: 2000)
        let other = makeTemporaryDirectory(self) + "/other.logbook"
        let bundle = try LogBundle(path: other, archive: ArchiveOptions(compressionLevel: nil))
        try bundle.logger("other").info("from the other bundle \(1)")
        try bundle.close()
        let stranger = "archive-0000000900.lba"
        try FileManager.default.copyItem(atPath: other + "/archive/archive-0000000001.lba",
                                         toPath: path + "/archive/" + stranger)
        let reader = try LogReader(path: path)
        let entries = try reader.readAll()
        XCTAssertEqual(entries.count, 2000)
        XCTAssertFalse(entries.contains { $0.logger == "other" })
        XCTAssertTrue(reader.issues.contains { $0.file == stranger && $0.reason.contains("another bundle") }, "\(reader.issues)")
    }

    /// The ring header's counters damaged (they are not checksummed: they change all the time):
    /// a bundle that never crashed and never lost a file to retention counts exactly, so more
    /// records than counted, or more overwritten than written, is damage (found by an outside test);
    /// records overwritten in a lossless ring cannot be at all.
    func testDamagedCountersAreReported() throws {
        let path = try makeArchivedBundle(records: 3000)
        let copy = try makeCopy(of: path)
        var records = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path + "/ring"))[128..<136])
        records[1] ^= 0x02  // 512 fewer
        try patch(copy + "/ring", at: 128, with: records)
        let (_, issues, _) = try verify(copy)
        XCTAssertTrue(issues.contains { $0.kind == .corrupt && $0.reason.contains("counters are damaged") }, "\(issues)")

        let overwritten = try makeCopy(of: path)
        try patch(overwritten + "/ring", at: 216, with: [0, 0, 1, 0, 0, 0, 0, 0])  // 65,536 overwritten
        let (_, more, _) = try verify(overwritten)
        XCTAssertTrue(more.contains { $0.kind == .corrupt && $0.reason.contains("counters are impossible") }, "\(more)")
    }

    /// Two files with one number, and names swapped: the header and END frame say which file it
    /// is (found by an outside test: both passed).
    func testDuplicateAndSwappedArchiveFilesAreReported() throws {
        let path = try makeArchivedBundle()
        let files = try archiveFiles(path)
        let copy = try makeCopy(of: path)
        try FileManager.default.copyItem(atPath: copy + "/archive/" + files[4],
                                         toPath: copy + "/archive/" + files[4] + ".unsynced")
        let (_, duplicate, _) = try verify(copy)
        XCTAssertTrue(duplicate.contains { $0.isFailure && $0.reason.contains("two archive files") }, "\(duplicate)")

        let swapped = try makeCopy(of: path)
        let a = swapped + "/archive/" + files[4], b = swapped + "/archive/" + files[5]
        try FileManager.default.moveItem(atPath: a, toPath: a + ".tmp")
        try FileManager.default.moveItem(atPath: b, toPath: a)
        try FileManager.default.moveItem(atPath: a + ".tmp", toPath: b)
        let (entries, swappedIssues, _) = try verify(swapped)
        XCTAssertEqual(entries, 20_000, "every record is still read")
        XCTAssertTrue(swappedIssues.contains { $0.isFailure && $0.file == files[4] && $0.reason.contains("renamed") },
                      "\(swappedIssues)")
    }

    func testMissingMetaIsReported() throws {
        let path = try makeArchivedBundle(records: 100)
        try FileManager.default.removeItem(atPath: path + "/meta")
        let (entries, issues, _) = try verify(path)
        XCTAssertEqual(entries, 100, "archive files carry their meta entries")
        XCTAssertTrue(issues.contains { $0.kind == .missing && $0.file == "meta" }, "\(issues)")
    }

    /// Files replaced by a FIFO, a symlink or garbage: reported, never followed, never a hang.
    func testReplacedFilesAreReportedNotFollowed() throws {
        let path = try makeArchivedBundle(records: 3000)
        let victim = makeTemporaryDirectory(self) + "/victim"
        FileManager.default.createFile(atPath: victim, contents: Data(repeating: 0x41, count: 8192))
        let files = try archiveFiles(path)
        try FileManager.default.removeItem(atPath: path + "/archive/" + files[0])
        XCTAssertEqual(mkfifo(path + "/archive/" + files[0], 0o600), 0)
        try FileManager.default.removeItem(atPath: path + "/archive/" + files[1])
        try FileManager.default.createSymbolicLink(atPath: path + "/archive/" + files[1], withDestinationPath: victim)
        try Data(repeating: 0x5A, count: 10_000).write(to: URL(fileURLWithPath: path + "/archive/" + files[2]))
        try FileManager.default.removeItem(atPath: path + "/meta")
        XCTAssertEqual(mkfifo(path + "/meta", 0o600), 0)
        let (_, issues, summary) = try verify(path)
        for name in files.prefix(3) {
            XCTAssertTrue(issues.contains { $0.file == name && $0.isFailure }, "\(name): \(issues)")
        }
        XCTAssertTrue(issues.contains { $0.file == "meta" && $0.isFailure }, "\(issues)")
        XCTAssertGreaterThan(summary.recordsLost, 0)
    }

    /// A lossless bundle whose ring lost a chunk header (a damaged sector): its claim number is
    /// neither in the ring nor in the archive.
    func testDamagedChunkHeaderInALosslessRingIsCounted() throws {
        let path = makeTemporaryDirectory(self) + "/header.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 0)
        let log = try bundle.logger("h")
        for i in 0..<500 { log.info("record \(i) padding \(String(repeating: "x", count: 40))") }
        try bundle.close()
        try patch(path + "/ring", at: 4096 + 2 * 4096 + 20, with: [0xAB])  // chunk 2's header
        let (entries, issues, summary) = try verify(path)
        XCTAssertLessThan(entries, 500)
        XCTAssertTrue(issues.contains { $0.kind == .missing && $0.reason.contains("claims") }, "\(issues)")
        XCTAssertEqual(summary.recordsLost, UInt64(500 - entries))
    }

    // MARK: damaged records are unreadable, never overwritten (F5)

    /// F5: records whose bytes were damaged are unreadable (issues account for them, verify counts
    /// them) and never among the records "overwritten before they could be read" (found by an
    /// outside test: `logbook export` warned that damaged records were overwritten in the ring,
    /// while `logbook verify` said 0 overwritten and 2 unreadable). Three kinds of damage: arguments
    /// that do not decode, a record that fails its page check, and a large record whose first
    /// fragment fails its page check (its middle and last fragments then find no beginning).
    func testDamagedRecordsAreUnreadableNotOverwritten() throws {
        let path = makeTemporaryDirectory(self) + "/damaged.logbook"
        // 16 KiB chunks: records cross the chunk's 4 KiB pages, and those carry a page check. No
        // idle sealing: the same layout on every machine. The ring never wraps.
        let bundle = try LogBundle(path: path, capacity: 16 * 16384, chunkSize: 16384, idleSealMilliseconds: 0)
        let log = try bundle.logger("damage")
        log.info("large \(String(repeating: "L", count: 40_000))")  // first, middle and last fragments
        for i in 0..<2000 { log.info("record \(i) \(String(repeating: "d", count: i % 50))") }
        try bundle.close()
        let info = try LogReader(path: path).info()
        XCTAssertEqual(info.recordsOverwritten, 0, "the ring did not wrap")
        let clean = try readBundle(path)
        XCTAssertEqual(clean.issues.map(\.description), [])
        XCTAssertEqual(clean.entries.count, 2001)

        let large = try XCTUnwrap(clean.entries.first { $0.message.hasPrefix("large") })
        let small = clean.entries.filter { $0.chunkSequence != large.chunkSequence }
            .sorted { ($0.chunkSequence, $0.chunkOffset) < ($1.chunkSequence, $1.chunkOffset) }
        // 1. A record whose arguments do not decode.
        let undecodable = small[300]
        try breakArguments(of: undecodable, in: path, info)
        // 2. A record that crosses a page of its chunk: a byte of it past the page boundary.
        let pairs = zip(small, small.dropFirst()).filter { a, b in
            let boundary = (Int(a.chunkOffset) / 4096 + 1) * 4096
            return a.chunkSequence == b.chunkSequence && a.chunkSequence != undecodable.chunkSequence &&
                Int(b.chunkOffset) > boundary + 16
        }
        let crossing = try XCTUnwrap(pairs.first?.0, "a record crosses a page")
        try flipByte(in: path, at: ringOffset(of: crossing, info) - Int(crossing.chunkOffset) +
            (Int(crossing.chunkOffset) / 4096 + 1) * 4096)
        // 3. The large record's first fragment (it fills the rest of its chunk) past its first page.
        let page = (Int(large.chunkOffset) / 4096 + 1) * 4096 + 100
        XCTAssertLessThan(page, Int(info.chunkSize) - 16, "inside the first fragment")
        try flipByte(in: path, at: ringOffset(of: large, info) - Int(large.chunkOffset) + page)

        // The whole read (lb_reader_scan) and the streaming one (lb_reader_stream), with and
        // without a filter that hands nothing out. A record the filter skips is not decoded, so
        // its arguments are not checked: filtered, the undecodable record is read, not reported.
        let reads: [(String, Int, (LogReader) throws -> Int)] = [
            ("readAll", 3, { try $0.readAll().count }),
            ("scan", 3, { reader in var count = 0; try reader.scan { _ in count += 1 }; return count }),
            ("stream filtered", 2, { reader in
                var count = 0
                try reader.stream(where: LogReader.Filter(minimumLevel: .critical)) { _ in count += 1 }
                return count
            }),
        ]
        for (name, damaged, read) in reads {
            let reader = try LogReader(path: path)
            let count = try read(reader)
            XCTAssertEqual(count, name == "stream filtered" ? 0 : 2001 - damaged, name)
            let issues = reader.issues
            XCTAssertEqual(issues.reduce(0) { $0 + $1.records }, UInt64(damaged), "\(name): \(issues)")
            XCTAssertEqual(reader.overwrittenRecords, 0, "\(name): damaged records are not overwritten: \(issues)")
            let summary = try reader.verify()
            XCTAssertTrue(summary.accounted, name)
            XCTAssertEqual(summary.recordsUnreadable, UInt64(damaged), name)
            XCTAssertEqual(summary.recordsOverwritten, 0, name)
            XCTAssertEqual(summary.recordsLost, 0, name)
            XCTAssertEqual(reader.overwrittenRecords, 0, "\(name), after verify")
        }
    }

    /// F5 in a ring the overwrite policy wraps: a follower that began reading before the first
    /// record counts as overwritten exactly the records the policy destroyed (the ring header's
    /// count, as verify reports it), the damaged records of the chunks still there as unreadable
    /// only; a reader that came after the overwrites counts none. Read once the writer has
    /// stopped, so the counts are exact on any machine.
    func testWrappedRingCountsOverwrittenAndDamagedRecordsApart() throws {
        let path = makeTemporaryDirectory(self) + "/wrapped.logbook"
        let bundle = try LogBundle(path: path, capacity: 8 * 4096, chunkSize: 4096, idleSealMilliseconds: 0)
        let log = try bundle.logger("wrap")
        // Their first scan finds the ring empty: every record overwritten is one they never saw.
        let holder = try LogReader(path: path), streamer = try LogReader(path: path)
        XCTAssertEqual(try holder.readNew().count, 0)
        var streamed = 0
        try streamer.scan { _ in streamed += 1 }
        let written = 5000
        for i in 0..<written { log.info("record \(i) \(String(repeating: "w", count: i % 30))") }
        try bundle.close()
        let info = try LogReader(path: path).info()
        XCTAssertGreaterThan(info.recordsOverwritten, UInt64(written / 2), "the ring wrapped many times")
        let survivors = try readBundle(path).entries
        XCTAssertEqual(UInt64(survivors.count) + info.recordsOverwritten, UInt64(written))
        // Two damaged records, in two chunks still in the ring.
        let first = survivors[survivors.count / 4]
        let second = try XCTUnwrap(survivors.last { $0.chunkSequence != first.chunkSequence })
        try breakArguments(of: first, in: path, info)
        try breakArguments(of: second, in: path, info)
        let damaged: UInt64 = 2

        let held = try holder.readNew().count
        try streamer.scan { _ in streamed += 1 }
        for (name, reader, read) in [("readNew", holder, held), ("scan", streamer, streamed)] {
            XCTAssertEqual(UInt64(read), UInt64(survivors.count) - damaged, name)
            XCTAssertEqual(reader.overwrittenRecords, info.recordsOverwritten, "\(name): \(reader.issues)")
            let summary = try reader.verify()
            XCTAssertTrue(summary.accounted, name)
            XCTAssertEqual(summary.recordsOverwritten, info.recordsOverwritten, name)
            XCTAssertEqual(reader.overwrittenRecords, summary.recordsOverwritten, name)
            XCTAssertEqual(summary.recordsUnreadable, damaged, name)
            XCTAssertEqual(summary.recordsLost, 0, name)
            XCTAssertEqual(UInt64(read) + reader.overwrittenRecords + summary.recordsUnreadable, UInt64(written), name)
        }
        // A reader that came after: the overwritten records are the bundle's (info, verify), not
        // ones it was too slow for.
        let late = try LogReader(path: path)
        XCTAssertEqual(try late.readAll().count, survivors.count - Int(damaged))
        XCTAssertEqual(late.overwrittenRecords, 0, "\(late.issues)")
        let summary = try late.verify()
        XCTAssertEqual(summary.recordsUnreadable, damaged)
        XCTAssertEqual(summary.recordsOverwritten, info.recordsOverwritten)
        XCTAssertEqual(summary.recordsLost, 0)
    }

    /// F5 for a chunk that leaves the ring after a follower read it: its damaged record stays
    /// unreadable (the follower's issue accounts for it) when the policy overwrites the chunk
    /// later, and is not counted again as overwritten; verify agrees (no "counters are damaged").
    func testDamagedRecordReadBeforeItsChunkWasOverwrittenIsNotOverwritten() throws {
        let path = makeTemporaryDirectory(self) + "/read-then-lapped.logbook"
        let bundle = try LogBundle(path: path, capacity: 8 * 4096, chunkSize: 4096, idleSealMilliseconds: 0)
        let log = try bundle.logger("lap")
        let follower = try LogReader(path: path)
        var read = 0
        try follower.scan { _ in read += 1 }
        for i in 0..<300 { log.info("early \(i) \(String(repeating: "e", count: i % 30))") }
        // A record of the first chunk (sealed: full), damaged while the writer runs on.
        let early = try readBundle(path).entries
        XCTAssertEqual(early.count, 300)
        let info = try LogReader(path: path).info()
        try breakArguments(of: early[10], in: path, info)
        try follower.scan { _ in read += 1 }
        XCTAssertEqual(read, 299)
        XCTAssertEqual(follower.issues.reduce(0) { $0 + $1.records }, 1, "\(follower.issues)")
        XCTAssertEqual(follower.overwrittenRecords, 0)
        // Laps of the ring: the damaged chunk is overwritten.
        for i in 0..<5000 { log.info("late \(i) \(String(repeating: "l", count: i % 30))") }
        try bundle.close()
        try follower.scan { _ in read += 1 }
        let header = try LogReader(path: path).info().recordsOverwritten
        XCTAssertGreaterThan(header, 300, "the early chunks were overwritten")
        XCTAssertEqual(UInt64(read) + follower.overwrittenRecords + 1, 5300, "\(follower.issues)")
        let summary = try follower.verify()
        XCTAssertTrue(summary.accounted)
        XCTAssertEqual(summary.recordsUnreadable, 1)
        XCTAssertEqual(summary.recordsLost, 0)
        XCTAssertEqual(summary.recordsOverwritten, header)
        XCTAssertFalse(follower.issues.contains { $0.isFailure && $0.file == "ring" && $0.offset == 128 },
                       "the counters are right: \(follower.issues)")
    }

    /// What F5's fix keeps: a large record whose beginning the overwrite policy destroyed (its
    /// first fragments' chunks were reused by its own later ones) is counted as overwritten, while
    /// a damaged record beside it is not. verify says so too: its issue is `overwritten` and its
    /// summary counts it overwritten, not unreadable (it said "torn" and counted it unreadable
    /// while the reader's count and export said overwritten).
    func testLargeRecordWhoseBeginningWasOverwrittenCountsButDamageDoesNot() throws {
        let path = makeTemporaryDirectory(self) + "/lapped-large.logbook"
        let bundle = try LogBundle(path: path, capacity: 8 * 4096, chunkSize: 4096, idleSealMilliseconds: 0)
        let log = try bundle.logger("large")
        log.info("large \(String(repeating: "L", count: 60_000))")  // 15 chunks through a ring of 8
        for i in 0..<20 { log.info("record \(i)") }
        // Chunks of first and middle fragments count no record: the ring header's count of
        // records overwritten stays 0, while chunks were reused.
        XCTAssertGreaterThan(bundle.counters.chunksReused, 0, "the record overwrote its own beginning")
        try bundle.close()
        let info = try LogReader(path: path).info()
        let clean = try LogReader(path: path)
        let entries = try clean.readAll()
        XCTAssertEqual(entries.count, 20)
        XCTAssertEqual(clean.overwrittenRecords, 1, "its beginning was overwritten: \(clean.issues)")
        XCTAssertEqual(clean.issues.reduce(0) { $0 + $1.records }, 1, "its last fragment: \(clean.issues)")
        let lapped = clean.issues.filter(\.isBeginningOverwritten)
        XCTAssertTrue(!lapped.isEmpty && lapped.allSatisfy { $0.kind == .overwritten }, "\(clean.issues)")
        XCTAssertEqual(lapped.reduce(0) { $0 + $1.records }, 1, "its last fragment: \(clean.issues)")

        try breakArguments(of: entries[10], in: path, info)
        let reader = try LogReader(path: path)
        var read = 0
        try reader.scan { _ in read += 1 }
        XCTAssertEqual(read, 19)
        XCTAssertEqual(reader.overwrittenRecords, 1, "\(reader.issues)")
        let summary = try reader.verify()
        XCTAssertEqual(summary.recordsUnreadable, 1, "the damaged record")
        XCTAssertEqual(summary.recordsOverwritten, info.recordsOverwritten + 1, "and the one whose beginning was overwritten")
        XCTAssertEqual(summary.recordsLost, 0)
    }

    /// Where a record of the ring starts in the ring file.
    func ringOffset(of entry: LogEntry, _ info: BundleInfo) -> Int {
        4096 + Int(entry.chunkSequence % UInt64(info.chunkCount)) * Int(info.chunkSize) + Int(entry.chunkOffset)
    }

    /// Makes a record's arguments undecodable: its first argument's type byte (after the 24 bytes
    /// of header, timestamp, site, logger and level) becomes one no format has.
    func breakArguments(of entry: LogEntry, in path: String, _ info: BundleInfo) throws {
        try patch(path + "/ring", at: ringOffset(of: entry, info) + 24, with: [0xFF])
    }

    func flipByte(in path: String, at offset: Int) throws {
        let byte = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path + "/ring"))[offset..<(offset + 1)])
        try patch(path + "/ring", at: offset, with: [byte[0] ^ 0x5A])
    }

    // MARK: helpers

    func makeCopy(of path: String) throws -> String {
        let copy = makeTemporaryDirectory(self) + "/copy.logbook"
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        return copy
    }

    func truncate(_ file: String, to length: Int) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
        try handle.truncate(atOffset: UInt64(length))
        try handle.close()
    }

    func patch(_ file: String, at offset: Int, with bytes: [UInt8]) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
        try handle.seek(toOffset: UInt64(offset))
        handle.write(Data(bytes))
        try handle.close()
    }

    func indexOf(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
        }
        return nil
    }
}
