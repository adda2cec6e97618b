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
        cursor.forget(below: entries.map(\.chunkSequence).max()!)
        XCTAssertEqual(cursor.marks.count, 1)
    }
}
