import Foundation
import Logbook
import LogbookQuery
import LogbookTestKit
import XCTest

/// The reader runs on a thread of its own and hands entries over in batches (query_batches.c), two
/// going round, or one at a time when messages are rendered from the reader: run under
/// ThreadSanitizer in CI. Many batches (by count and by bytes), every record once.
final class QueryBatchesConcurrencyTests: XCTestCase {
    func testEveryRecordOnceOverManyBatches() throws {
        let path = makeTemporaryDirectory(self) + "/b.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 20, chunkSize: 1 << 16, wrapPolicy: .lossless)
        let log = try bundle.logger("x")
        let count = 20_000
        for i in 0..<count { log.info("record \(i) \(String(repeating: "y", count: i % 7 == 0 ? 700 : 10))") }
        try bundle.close()
        let query = try LogQuery(sources: [path])
        for _ in 0..<3 {
            var seen = [Bool](repeating: false, count: count)
            try query.run("SELECT arg1, length(arg2) FROM records") { row in
                guard case .integer(let i) = row.values[0], case .integer(let length) = row.values[1] else { return XCTFail("\(row.values)") }
                XCTAssertFalse(seen[Int(i)], "record \(i) twice")
                XCTAssertEqual(length, i % 7 == 0 ? 700 : 10)
                seen[Int(i)] = true
            }
            XCTAssertEqual(seen.filter { $0 }.count, count)
        }
        // Asking for the message (rendered from the reader): the stream and SQL take turns.
        var messages = 0
        try query.run("SELECT arg1, message, logger, site FROM records") { row in
            guard case .integer(let i) = row.values[0], case .text(let message) = row.values[1] else { return XCTFail("\(row.values)") }
            XCTAssertEqual(message, "record \(i) \(String(repeating: "y", count: i % 7 == 0 ? 700 : 10))")
            XCTAssertEqual(row.values[2], .text("x"))
            XCTAssertEqual(row.values[3], .integer(1))
            messages += 1
        }
        XCTAssertEqual(messages, count)
        // Stopped early (LIMIT): the stream's thread is stopped and joined, nothing leaks.
        XCTAssertEqual(try query.rows("SELECT arg1 FROM records LIMIT 5").count, 5)
    }
}
