import Foundation
import XCTest
import Logbook
import LogbookExport
import LogbookTesting

/// The export cursor: per-chunk marks, the batch in flight, its file
/// round trip, and a damaged file refused rather than taken for "nothing exported".
final class ExportCursorTests: XCTestCase {
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
