import CLogbook
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

/// Power loss and kernel crashes (FORMAT.md "Power loss"): a record whose pages come from two
/// moments is never shown, and what a sync made durable is held to by verify. The simulator that
/// composes crash images page by page is `Tests/CTests/power_loss.c` (CProgramTests).
/// Those of its tests that CI also runs under ThreadSanitizer are in `PowerLossConcurrencyTests`.
final class PowerLossTests: XCTestCase {
    /// Replaces page `page` of chunk slot `slot` of `path`'s ring with the same page of `from`.
    private func copyPage(of from: String, into path: String, slot: Int, page: Int, chunkSize: Int) throws {
        let offset = UInt64(LB_RING_HEADER_SIZE) + UInt64(slot * chunkSize + page * 4096)
        let source = try FileHandle(forReadingFrom: URL(fileURLWithPath: from + "/ring"))
        try source.seek(toOffset: offset)
        let bytes = try source.read(upToCount: 4096) ?? Data()
        try source.close()
        let target = try FileHandle(forUpdating: URL(fileURLWithPath: path + "/ring"))
        try target.seek(toOffset: offset)
        target.write(bytes)
        try target.close()
    }

    private func copyBundle(_ from: String, to: String) throws {
        try FileManager.default.copyItem(atPath: from, toPath: to)
    }

    /// What a crash of `bundle`'s process leaves: a copy of its files taken while it is open (its
    /// writer lock left behind), then the original closed.
    private func crashImage(of bundle: LogBundle, at path: String, into image: String) throws {
        try copyBundle(path, to: image)
        try bundle.close()
        unlink(image + "/lock")
    }

    /// Verifies everything `reader` read: no issue may fail verify.
    private func assertVerifies(_ reader: LogReader, _ message: String = "", file: StaticString = #filePath,
                                line: UInt = #line) throws {
        _ = try reader.verify()
        XCTAssertTrue(reader.issues.filter(\.isFailure).isEmpty, "\(message) \(reader.issues)", file: file, line: line)
    }

    /// A record that crosses from the first page of its chunk into the second, whose second page
    /// is taken from a moment before it was written: the reader shows every other record, never
    /// that one, and names it in an issue (torn: no sync made it durable).
    func testARecordWhoseLaterPageIsFromAnEarlierMomentIsNeverShown() throws {
        let dir = makeTemporaryDirectory(self)
        let text = String(repeating: "x", count: 300)
        // One chunk holds every record; some cross its first page boundary.
        let second = dir + "/cross.logbook"
        let b2 = try LogBundle(path: second, capacity: 64 << 10, chunkSize: 16 << 10, idleSealMilliseconds: 0)
        let l2 = try b2.logger("pages")
        for i in 0..<4 { l2.info("early \(i) \(text)") }
        // The moment before the crossing record: its chunk's second page is still untouched.
        try copyBundle(second, to: dir + "/moment-a.logbook")
        for i in 4..<24 { l2.info("late \(i) \(text)") }
        try b2.close()
        let all = try LogReader(path: second).readAll()
        XCTAssertEqual(all.count, 24)
        // The chunk that holds them (the only one with records), and its slot.
        let slot = Int(all[0].chunkSequence % 4)
        XCTAssertTrue(all.allSatisfy { $0.chunkSequence == all[0].chunkSequence })
        // The record that crosses from page 0 into page 1 of the chunk.
        let offsets = all.map { Int($0.chunkOffset) }
        guard let crossing = offsets.indices.first(where: { i in
            i + 1 < offsets.count && offsets[i] < 4096 && offsets[i + 1] > 4096
        }) else { return XCTFail("no record crosses the first page: \(offsets)") }

        // The crash image: everything from the end, but the chunk's second page from moment A.
        try copyPage(of: dir + "/moment-a.logbook", into: second, slot: slot, page: 1, chunkSize: 16 << 10)
        let reader = try LogReader(path: second)
        let shown = try reader.readAll()
        XCTAssertFalse(shown.contains { $0.chunkOffset == all[crossing].chunkOffset },
                       "the record assembled from two moments is not shown")
        for entry in shown {
            let original = all.first { $0.chunkOffset == entry.chunkOffset }
            XCTAssertEqual(entry.message, original?.message, "every record shown is the one logged")
        }
        let flagged = reader.issues.filter { $0.reason.contains("page check") }
        XCTAssertEqual(flagged.count, 1, "\(reader.issues)")
        XCTAssertEqual(flagged.first?.kind, .torn, "no sync made it durable")
        XCTAssertEqual(flagged.first?.records, 1)
        XCTAssertEqual(flagged.first?.offset, UInt64(LB_RING_HEADER_SIZE) + UInt64(slot * (16 << 10)) + UInt64(all[crossing].chunkOffset))

        // `logbook show` says so on stderr, and with --json marks it in the stream.
        let logbook = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("logbook").path
        let json = try runProgram(logbook, ["show", "--json", second])
        XCTAssertEqual(json.status, 0, json.output)
        XCTAssertTrue(json.output.contains("{\"notice\":\"altered\",\"records\":1}"), json.output)
        XCTAssertTrue(json.output.contains("1 records were not shown"), json.output)
    }

    /// Zeroes page `page` of chunk slot `slot` of `file` (the ring, or the mirror: no header page).
    private func zeroPage(_ file: String, slot: Int, page: Int, chunkSize: Int) throws {
        let base = file.hasSuffix("/ring") ? UInt64(LB_RING_HEADER_SIZE) : 0
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
        try handle.seek(toOffset: base + UInt64(slot * chunkSize + page * 4096))
        handle.write(Data(count: 4096))
        try handle.close()
    }

    /// After `sync()` the records are in the mirror too: a ring page lost to a power loss costs
    /// nothing durable; when the mirror's copy is damaged as well, verify fails and names them.
    func testWhatASyncMadeDurableSurvivesItsRingPageAndIsHeldToByVerify() throws {
        let dir = makeTemporaryDirectory(self)
        let path = dir + "/synced.logbook"
        let chunk = 16 << 10
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: chunk, idleSealMilliseconds: 0)
        let log = try bundle.logger("sync")
        let text = String(repeating: "y", count: 200)
        for i in 0..<40 { log.info("durable \(i) \(text)") }
        try bundle.sync()
        for i in 0..<5 { log.info("after \(i)") }
        try bundle.close()  // a bundle that synced ends with a sync
        XCTAssertTrue(FileManager.default.fileExists(atPath: path + "/durable"))
        XCTAssertTrue(FileManager.default.fileExists(atPath: path + "/mirror"))
        let all = try LogReader(path: path).readAll()
        XCTAssertEqual(all.count, 45)
        let slot = Int(all[0].chunkSequence % 4)

        let ringLost = dir + "/ring-page.logbook"
        try copyBundle(path, to: ringLost)
        try zeroPage(ringLost + "/ring", slot: slot, page: 1, chunkSize: chunk)
        let fromMirror = try LogReader(path: ringLost)
        XCTAssertEqual(try fromMirror.readAll().map(\.message), all.map(\.message))
        try assertVerifies(fromMirror)

        let bothLost = dir + "/both.logbook"
        try copyBundle(ringLost, to: bothLost)
        try zeroPage(bothLost + "/mirror", slot: slot, page: 1, chunkSize: chunk)
        let damaged = try LogReader(path: bothLost)
        XCTAssertLessThan(try damaged.readAll().count, 45)
        _ = try damaged.verify()
        XCTAssertTrue(damaged.issues.contains { $0.isFailure && $0.reason.contains("a sync made") },
                      "\(damaged.issues)")
    }

    /// The bounded-loss mode syncs by itself: the `durable` file appears and grows a generation
    /// while a program logs, and a clean close leaves the bundle durable and verified.
    func testTheIntervalModeSyncsWhileTheProgramLogs() throws {
        let path = makeTemporaryDirectory(self) + "/interval.logbook"
        let bundle = try LogBundle(path: path, capacity: 256 << 10, chunkSize: 16 << 10,
                                   durability: .interval(.milliseconds(5)))
        let log = try bundle.logger("interval")
        var logged = 0
        // Waits on what the syncer did (the file's first copy written), not on time.
        let synced = waitUntil {
            log.info("record \(logged)")
            logged += 1
            let size = (try? FileManager.default.attributesOfItem(atPath: path + "/durable")[.size] as? Int) ?? 0
            return size > 0
        }
        XCTAssertTrue(synced, "the interval syncer wrote the durable file")
        try bundle.close()
        let reader = try LogReader(path: path)
        XCTAssertEqual(try reader.readAll().count, logged)
        try assertVerifies(reader)
    }

    /// A writer that synced, then died: its chunk's header page comes back from before the chunk
    /// was claimed (zeros), as a power loss can leave it. The durable records are read from the
    /// mirror, the rest is torn and verify passes; the next writer puts the durable records back
    /// into the ring before it recovers it.
    func testAfterACrashTheDurableRecordsComeFromTheMirrorAndTheNextWriterRestoresThem() throws {
        let dir = makeTemporaryDirectory(self)
        let path = dir + "/crashed.logbook"
        let chunk = 16 << 10
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: chunk, idleSealMilliseconds: 0)
        let log = try bundle.logger("crash")
        let text = String(repeating: "z", count: 200)
        for i in 0..<12 { log.info("durable \(i) \(text)") }
        try bundle.sync()
        for i in 0..<40 { log.info("later \(i) \(text)") }  // not synced
        // The process dies here: a copy of its files is what the crash leaves.
        let image = dir + "/image.logbook"
        try crashImage(of: bundle, at: path, into: image)
        let all = try LogReader(path: image).readAll()
        XCTAssertEqual(all.count, 52)
        let slot = Int(all[0].chunkSequence % 4)
        try zeroPage(image + "/ring", slot: slot, page: 0, chunkSize: chunk)

        let reader = try LogReader(path: image)
        let shown = try reader.readAll()
        XCTAssertEqual(shown.map(\.message), all.prefix(12).map(\.message), "exactly the durable records")
        try assertVerifies(reader)

        let next = try LogBundle(path: image, idleSealMilliseconds: 0)
        try next.logger("crash").info("after the crash")
        try next.close()
        let reopened = try LogReader(path: image)
        XCTAssertEqual(try reopened.readAll().map(\.message), all.prefix(12).map(\.message) + ["after the crash"])
        try assertVerifies(reopened)
        // The ring holds them again: without the mirror, they are still read.
        unlink(image + "/mirror")
        unlink(image + "/durable")
        XCTAssertEqual(try LogReader(path: image).readAll().count, 13)
    }

    /// A bundle that syncs and archives, crashed: a hole in its archive file being written (pages
    /// written after the last sync that came back from before) ends what readers take of that file,
    /// as torn; the chunks after it are read from the ring, verify passes, and the next archiver
    /// cuts the file there and archives them again: every record once.
    func testAHoleInTheArchiveFileBeingWrittenEndsItAndItsChunksComeFromTheRing() throws {
        let dir = makeTemporaryDirectory(self)
        let path = dir + "/archived.logbook"
        let archive = ArchiveOptions(maxFileSize: 64 << 20, maxFiles: nil, quota: nil, compressionLevel: nil)
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10, wrapPolicy: .lossless,
                                   idleSealMilliseconds: 0, archive: archive)
        let log = try bundle.logger("archive")
        let text = String(repeating: "a", count: 300)
        for i in 0..<200 { log.info("synced \(i) \(text)") }
        try bundle.sync()
        for i in 0..<200 { log.info("later \(i) \(text)") }
        try bundle.sync()  // archived and synced too: the hole below stands for what was not
        let image = dir + "/image.logbook"
        try crashImage(of: bundle, at: path, into: image)
        let writing = try FileManager.default.contentsOfDirectory(atPath: image + "/archive")
            .filter { $0.hasSuffix(".lba.writing") }
        XCTAssertEqual(writing.count, 1, "\(writing)")
        let file = image + "/archive/" + writing[0]
        let size = try FileManager.default.attributesOfItem(atPath: file)[.size] as! Int
        XCTAssertGreaterThan(size, 3 * 4096)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
        try handle.seek(toOffset: UInt64(size / 2 / 4096 * 4096))
        handle.write(Data(count: 4096))
        try handle.close()

        let reader = try LogReader(path: image)
        let messages = try reader.readAll().map(\.message)
        XCTAssertEqual(messages.count, 400, "the ring holds what the file lost")
        XCTAssertEqual(Set(messages).count, 400)
        _ = try reader.verify()
        XCTAssertTrue(reader.issues.contains { $0.kind == .torn && $0.file.hasSuffix(".lba.writing") }, "\(reader.issues)")
        XCTAssertTrue(reader.issues.filter(\.isFailure).isEmpty, "\(reader.issues)")

        let next = try LogBundle(path: image, idleSealMilliseconds: 0, archive: archive)
        try next.close()
        let after = try LogReader(path: image)
        XCTAssertEqual(Set(try after.readAll().map(\.message)).count, 400)
        try assertVerifies(after)
    }

    /// Found by an outside tester: a writer reopening a bundle whose ring header page came back
    /// from before chunks it counts (a page never synced) handed out their sequence numbers
    /// again, and readers took its new records' chunk for the old one from the mirror.
    func testAWriterReopeningAfterAPowerLossNeverReusesAChunkNumber() throws {
        let dir = makeTemporaryDirectory(self)
        let path = dir + "/reopen.logbook"
        let chunk = 16 << 10
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: chunk, idleSealMilliseconds: 0)
        let log = try bundle.logger("reopen")
        log.info("first")
        try bundle.sync()
        let ring = try FileHandle(forReadingFrom: URL(fileURLWithPath: path + "/ring"))
        let oldHeader = try ring.read(upToCount: 4096) ?? Data()
        try ring.close()
        try bundle.flush()  // the next record claims chunk 2, which the next sync lists
        for i in 0..<5 { log.info("later \(i)") }
        try bundle.sync()
        let image = dir + "/image.logbook"
        try crashImage(of: bundle, at: path, into: image)
        let header = try FileHandle(forUpdating: URL(fileURLWithPath: image + "/ring"))
        header.write(oldHeader)  // the header page as it was at the first sync
        try header.close()

        let next = try LogBundle(path: image, capacity: 64 << 10, chunkSize: chunk, idleSealMilliseconds: 0)
        let again = try next.logger("reopen")
        for i in 0..<20 { again.info("after \(i)") }
        try next.close()
        let reader = try LogReader(path: image)
        let messages = try reader.readAll().map(\.message)
        XCTAssertEqual(messages.filter { $0.hasPrefix("after ") }.count, 20, "\(reader.issues)")
        XCTAssertEqual(Set(messages).count, messages.count, "no record twice")
        try assertVerifies(reader)
    }

    /// Found by an outside tester: after a power loss the ring (never synced) came back older than
    /// the archive files (synced with every batch): a chunk a file holds sealed read *active* in
    /// the ring with fewer records. A writer reopening the bundle sealed it there and archived it
    /// again, and verify then failed on a healthy bundle ("chunk archived twice"), its summary
    /// counting fewer records than it read. The file's copy is taken as the chunk archived, and
    /// the ring header's count of records is raised to what the files and the ring hold.
    func testAWriterReopeningARingOlderThanItsArchiveFilesArchivesNoChunkTwice() throws {
        let dir = makeTemporaryDirectory(self)
        let path = dir + "/older-ring.logbook"
        func open(_ path: String) throws -> LogBundle {
            try LogBundle(path: path, capacity: 8 * 4096, chunkSize: 4096, wrapPolicy: .lossless,
                          idleSealMilliseconds: 0, losslessWaitMilliseconds: 30_000,
                          archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil,
                                                  compressionLevel: nil))
        }
        let bundle = try open(path)
        let log = try bundle.logger("older")
        for i in 0..<10 { log.info("early \(i)") }
        try bundle.sync()  // the first chunk, active, with 10 records: durable
        let olderRing = try Data(contentsOf: URL(fileURLWithPath: path + "/ring"))
        for i in 0..<300 { log.info("later \(i) \(String(repeating: "x", count: 40))") }
        try bundle.flush()
        try bundle.syncArchive()  // every chunk, the first one sealed since, is in a synced archive file
        let image = dir + "/image.logbook"
        try crashImage(of: bundle, at: path, into: image)
        try olderRing.write(to: URL(fileURLWithPath: image + "/ring"))  // its pages from the first sync

        let next = try open(image)
        let again = try next.logger("older")
        for i in 0..<20 { again.info("after \(i)") }
        try next.close()
        let reader = try LogReader(path: image)
        let messages = try reader.readAll().map(\.message)
        XCTAssertEqual(Set(messages).count, messages.count, "no record twice")
        XCTAssertEqual(messages.count, 330, "\(reader.issues)")
        let summary = try reader.verify()
        XCTAssertTrue(reader.issues.filter(\.isFailure).isEmpty, "\(reader.issues)")
        XCTAssertEqual(summary.recordsExpected, summary.recordsFound + summary.recordsUnreadable, "\(reader.issues)")
    }

    /// Found by an outside tester: a `durable` copy whose CRC holds but whose entry claims more
    /// bytes than a chunk has overflowed a buffer when a writer opened the bundle. Such a copy is
    /// not trusted: the bundle opens, logs and reads.
    func testADurableCopyThatCouldNotHaveBeenWrittenIsNotTrusted() throws {
        let path = makeTemporaryDirectory(self) + "/lying.logbook"
        let chunk = 16 << 10
        do {
            let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: chunk, idleSealMilliseconds: 0)
            try bundle.logger("lying").info("before")
            try bundle.sync()
            try bundle.close()
        }
        var durable = try Data(contentsOf: URL(fileURLWithPath: path + "/durable"))
        let copy = durable.count / 2
        for base in [0, copy] {
            let count = durable.withUnsafeBytes { $0.load(fromByteOffset: base + 56, as: UInt32.self) }
            guard count > 0 else { continue }
            durable.withUnsafeMutableBytes { raw in
                raw.storeBytes(of: UInt32(2 * chunk), toByteOffset: base + 96 + 16, as: UInt32.self)
                let entries = lb_crc32c(0, raw.baseAddress! + base + 96, 24 * Int(count))
                raw.storeBytes(of: entries, toByteOffset: base + 60, as: UInt32.self)
                raw.storeBytes(of: lb_crc32c(0, raw.baseAddress! + base, 92), toByteOffset: base + 92, as: UInt32.self)
            }
        }
        try durable.write(to: URL(fileURLWithPath: path + "/durable"))
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: chunk, idleSealMilliseconds: 0)
        try bundle.logger("lying").info("after")
        try bundle.close()
        XCTAssertEqual(try LogReader(path: path).readAll().map(\.message), ["before", "after"])
    }

    /// Found by an outside tester: under the overwrite policy, a listed chunk whose ring header
    /// page is zeros (a page that never reached the disk) and whose mirror copy is damaged was
    /// taken for one a claim had reused, and its durable records vanished with verify passing.
    func testAZeroHeaderPageDoesNotExcuseALostDurableChunk() throws {
        let dir = makeTemporaryDirectory(self)
        let path = dir + "/zero.logbook"
        let chunk = 16 << 10
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: chunk, idleSealMilliseconds: 0)
        let log = try bundle.logger("zero")
        for i in 0..<10 { log.info("durable \(i)") }
        try bundle.sync()
        let image = dir + "/image.logbook"
        try crashImage(of: bundle, at: path, into: image)
        let slot = Int(try LogReader(path: image).readAll()[0].chunkSequence % 4)
        try zeroPage(image + "/ring", slot: slot, page: 0, chunkSize: chunk)
        try zeroPage(image + "/mirror", slot: slot, page: 0, chunkSize: chunk)
        let reader = try LogReader(path: image)
        XCTAssertEqual(try reader.readAll().count, 0)
        _ = try reader.verify()
        XCTAssertTrue(reader.issues.contains { $0.isFailure && $0.reason.contains("a sync made") }, "\(reader.issues)")
    }

    /// `sync()` after close is refused, never a silent success.
    func testSyncAfterCloseIsRefused() throws {
        let path = makeTemporaryDirectory(self) + "/closed.logbook"
        let bundle = try LogBundle(path: path)
        try bundle.close()
        XCTAssertThrowsError(try bundle.sync()) { error in
            XCTAssertTrue((error as? LogbookError)?.isClosed ?? false, "\(error)")
        }
    }
}
