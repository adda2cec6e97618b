import CLogbook
import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookExport
import LogbookTesting

/// The export cursor: per-chunk marks, the batch in flight, its file
/// round trip, and a damaged file refused rather than taken for "nothing exported".
final class ExportCursorConcurrencyTests: XCTestCase {
    func testMarksPerChunkSurviveASaveAndALoad() throws {
        let capture = try LogCapture()
        let log = try capture.logger("x")
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            for i in 0..<300 { log.info("thread \(thread) record \(i)") }
        }
        let entries = try capture.entries()
        XCTAssertEqual(entries.count, 600)
        XCTAssertGreaterThan(Set(entries.map(\.chunkSequence)).count, 1, "two threads: two chunks at least")
        var cursor = ExportCursor()
        let (done, rest) = (entries.prefix(250), entries.dropFirst(250))
        cursor.acknowledge(done)
        cursor.inFlight = ExportCursor.extent(of: rest.prefix(100))
        XCTAssertTrue(done.allSatisfy(cursor.isExported))
        // what is left to send: time order across chunks means a chunk's mark never covers a later entry of it
        XCTAssertEqual(entries.filter { !cursor.isExported($0) }.count, 350)
        XCTAssertEqual(rest.prefix(100).filter(cursor.wasInFlight).count, 100)
        XCTAssertEqual(cursor.exported, 250)

        let store = try ExportCursorStore(path: makeTemporaryDirectory(self) + "/cursors")
        try store.save(cursor, as: "otlp-collector")
        XCTAssertEqual(try store.load("otlp-collector"), cursor)
        XCTAssertEqual(try store.load("never-saved"), ExportCursor())
        // the counts of records lost (a whole read tops them up from the ring's counters) and of
        // earlier rings' records are kept; a count not known stays not known
        var counted = cursor
        counted.exportedOfEarlierRings = 7
        counted.lostOverwritten = 1_000
        counted.lostRetired = nil
        try store.save(counted, as: "counted")
        XCTAssertEqual(try store.load("counted"), counted)
        XCTAssertEqual(counted.exportedOfThisRing, 243)

        let file = store.path + "/otlp-collector.cursor"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        bytes[30] ^= 0x10
        try bytes.write(to: URL(fileURLWithPath: file))
        XCTAssertThrowsError(try store.load("otlp-collector")) { error in
            XCTAssertEqual((error as? LogbookError)?.errno, EPROTO, "\(error)")
        }
        let newest = entries.map(\.chunkSequence).max()!
        cursor.forget(below: newest)
        XCTAssertTrue(cursor.marks.keys.allSatisfy { $0 >= newest }, "only the newest chunk's mark can stay")
        XCTAssertEqual(cursor.lowWatermark, newest)
    }

    /// Between snapshots, each save appends a journal entry (the changed marks, the batches in
    /// flight, the totals): a new store (a restarted exporter) loads the snapshot with the entries
    /// after it. A torn or damaged tail (a power loss before it reached the disk) ends the journal
    /// there: the cursor is the last whole entry's. Entries of an older snapshot are never applied,
    /// and a damaged snapshot is refused whatever the journal holds.
    func testJournalEntriesAfterTheSnapshotAreAppliedUpToTheFirstBadOne() throws {
        let dir = makeTemporaryDirectory(self) + "/cursors"
        var cursor = ExportCursor()
        cursor.marks = [1: 100, 2: 200]
        cursor.exported = 10
        do {
            let store = try ExportCursorStore(path: dir)
            try store.save(cursor, as: "d")  // the snapshot
            var states = [cursor]
            for step in 1...5 {
                let chunk = UInt64(step % 3 + 1)
                cursor.marks[chunk] = (cursor.marks[chunk] ?? 0) + 64
                cursor.inFlight = [UInt64(step + 10): UInt32(step)]
                cursor.exported += 7
                cursor.repeated = UInt64(step)
                try store.append(cursor, changedChunks: [chunk], as: "d")
                states.append(cursor)
            }
            XCTAssertEqual(try ExportCursorStore(path: dir).load("d"), states[5], "snapshot + 5 entries")
            let journal = dir + "/d.journal"
            let whole = try Data(contentsOf: URL(fileURLWithPath: journal))
            let entryLength = whole.count / 5  // each entry: one changed mark, one in flight
            XCTAssertEqual(whole.count, 5 * entryLength)
            // cut inside the last entry: the fourth is the cursor
            try whole.prefix(whole.count - 3).write(to: URL(fileURLWithPath: journal))
            XCTAssertEqual(try ExportCursorStore(path: dir).load("d"), states[4], "a torn tail is not applied")
            // a flipped bit in the third entry: the second is the cursor, whatever follows
            var damaged = whole
            damaged[2 * entryLength + 45] ^= 0x01
            try damaged.write(to: URL(fileURLWithPath: journal))
            XCTAssertEqual(try ExportCursorStore(path: dir).load("d"), states[2], "nothing after a damaged entry")
            // garbage instead of a journal: the snapshot alone
            try Data(repeating: 0xA5, count: 300).write(to: URL(fileURLWithPath: journal))
            XCTAssertEqual(try ExportCursorStore(path: dir).load("d"), states[0])
            // a new snapshot: the old journal's entries (older generations) are never applied
            try whole.write(to: URL(fileURLWithPath: journal))
            let later = try ExportCursorStore(path: dir)
            var reloaded = try later.load("d")
            XCTAssertEqual(reloaded, states[5])
            reloaded.exported = 99
            try later.save(reloaded, as: "d")
            try whole.write(to: URL(fileURLWithPath: journal))  // entries of the snapshot before
            XCTAssertEqual(try ExportCursorStore(path: dir).load("d"), reloaded, "stale entries are skipped")
        }
        // a journal copied from another cursor (another destination, the same snapshot bytes) is
        // not applied: its entries carry that cursor's snapshot key
        do {
            let store = try ExportCursorStore(path: dir)
            let base = try store.load("d")
            try store.save(base, as: "d")
            try store.save(base, as: "other")
            var ahead = base
            ahead.marks[1] = 9999
            ahead.exported += 1000
            try store.append(ahead, changedChunks: [1], as: "other")
            try FileManager.default.removeItem(atPath: dir + "/d.journal")
            try FileManager.default.copyItem(atPath: dir + "/other.journal", toPath: dir + "/d.journal")
            XCTAssertEqual(try ExportCursorStore(path: dir).load("d"), base, "another cursor's journal skips nothing")
            XCTAssertEqual(try ExportCursorStore(path: dir).load("other"), ahead)
        }
        // a snapshot copied under another destination's name is refused (taken, it would skip
        // there what this one acknowledged); a version 1 snapshot, which named no destination, is read
        do {
            let store = try ExportCursorStore(path: dir)
            let base = try store.load("d")
            try store.save(base, as: "d")
            try? FileManager.default.removeItem(atPath: dir + "/copy.cursor")
            try FileManager.default.copyItem(atPath: dir + "/d.cursor", toPath: dir + "/copy.cursor")
            XCTAssertThrowsError(try ExportCursorStore(path: dir).load("copy")) { error in
                XCTAssertEqual((error as? LogbookError)?.errno, EPROTO, "\(error)")
                XCTAssertTrue("\(error)".contains("saved for another destination"), "\(error)")
            }
            XCTAssertEqual(try ExportCursorStore(path: dir).load("d"), base, "the original is its own")
            var version1 = ExportCursor()
            version1.ring = 42
            version1.marks = [3: 300]
            version1.inFlight = [4: 8]
            version1.exported = 5
            // saved before the counts of records lost: not known (the next whole read starts them)
            version1.lostOverwritten = nil
            version1.lostRetired = nil
            let legacy = Self.version1Snapshot(of: version1)
            try Data(legacy).write(to: URL(fileURLWithPath: dir + "/legacy.cursor"))
            XCTAssertEqual(try ExportCursorStore(path: dir).load("legacy"), version1)
        }
        // a hard link where the journal belongs (to a file elsewhere): loading and saving make a
        // journal of their own, and the other file is neither written nor truncated
        do {
            let outside = makeTemporaryDirectory(self) + "/precious"
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: outside))
            try FileManager.default.removeItem(atPath: dir + "/d.journal")
            XCTAssertEqual(link(outside, dir + "/d.journal"), 0)
            let store = try ExportCursorStore(path: dir)
            var loaded = try store.load("d")
            try store.save(loaded, as: "d")
            loaded.exported += 1
            try store.append(loaded, changedChunks: [1], as: "d")
            XCTAssertEqual(try String(contentsOfFile: outside, encoding: .utf8), "keep me")
            XCTAssertEqual(try ExportCursorStore(path: dir).load("d"), loaded)
        }
        // the snapshot damaged: refused, though the journal is whole
        let snapshot = dir + "/d.cursor"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: snapshot))
        bytes[bytes.count - 1] ^= 0x80
        try bytes.write(to: URL(fileURLWithPath: snapshot))
        XCTAssertThrowsError(try ExportCursorStore(path: dir).load("d")) { error in
            XCTAssertEqual((error as? LogbookError)?.errno, EPROTO, "\(error)")
        }
        // the snapshot deleted: the cursor starts over, and the journal left is not applied to it
        XCTAssertEqual(unlink(snapshot), 0)
        XCTAssertEqual(try ExportCursorStore(path: dir).load("d"), ExportCursor())
        let fresh = try ExportCursorStore(path: dir)
        XCTAssertEqual(try fresh.load("d"), ExportCursor())
        var next = ExportCursor()
        next.marks = [7: 7]
        try fresh.save(next, as: "d")
        XCTAssertEqual(try ExportCursorStore(path: dir).load("d"), next)
    }

    /// A snapshot as version 1 wrote it (docs/FORMAT.md, "Export cursor"): no destination key,
    /// entries from offset 56.
    static func version1Snapshot(of cursor: ExportCursor) -> [UInt8] {
        var out = Array("LBCURSR1".utf8)
        func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { out += $0 } }
        for value: UInt32 in [1, UInt32(cursor.marks.count), UInt32(cursor.inFlight.count), 0] { put(value) }
        for value in [cursor.ring, cursor.lowWatermark, cursor.exported, cursor.repeated] { put(value) }
        for table in [cursor.marks, cursor.inFlight] {
            for (sequence, offset) in table.sorted(by: { $0.key < $1.key }) {
                put(sequence)
                put(offset)
                put(UInt32(0))
            }
        }
        put(out.withUnsafeBytes { lb_crc32c(0, $0.baseAddress, $0.count) })
        return out
    }

    /// A symlink, a FIFO or a directory planted where a cursor belongs is refused: never followed,
    /// never waited on. (The cursor directory follows logbook_files.h's rule: a symlink on its
    /// path only when this user or root owns it.)
    func testPlantedFilesAreRefused() throws {
        let dir = makeTemporaryDirectory(self)
        let store = try ExportCursorStore(path: dir + "/cursors")
        try "elsewhere".write(toFile: dir + "/target", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: store.path + "/link.cursor", withDestinationPath: dir + "/target")
        XCTAssertEqual(mkfifo(store.path + "/fifo.cursor", 0o600), 0)
        try FileManager.default.createDirectory(atPath: store.path + "/dir.cursor", withIntermediateDirectories: false)
        for name in ["link", "fifo", "dir"] {
            XCTAssertThrowsError(try store.load(name), name) { error in
                XCTAssertNotNil(error as? LogbookError, "\(error)")
            }
        }
        XCTAssertEqual(try String(contentsOfFile: dir + "/target", encoding: .utf8), "elsewhere")
    }
}
