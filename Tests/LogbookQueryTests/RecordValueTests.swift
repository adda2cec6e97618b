import Foundation
import Logbook
import LogbookQuery
import LogbookTestKit
import XCTest

/// What the records table says of values SQLite cannot hold (NaN) and how it reads the operands
/// it hands to the reader (time as text, blobs).
final class RecordValueTests: XCTestCase {
    func logbook() throws -> String { try XCTUnwrap(logbookExecutable(), "the logbook executable is built with the tests") }

    /// NaN, a redacted value and a missing argument are all NULL in arg1 ... arg16 (SQLite holds
    /// no NaN); `args` tells them apart as show --json does; ±inf stay REAL.
    func testNaNRedactedAndMissingArgumentsAreToldApartByArgs() throws {
        let path = makeTemporaryDirectory(self) + "/nan.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 4096)
        let log = try bundle.logger("x")
        for _ in 0..<3 { log.info("ratio \(Double.nan) of \(1)") }
        log.info("ratio \(Float.nan) of \(2)")
        log.info("ratio \(0.5, privacy: .private) of \(3)")
        log.info("ratio \(Double.infinity) of \(4)")
        log.info("ratio \("nan") of \(5)")
        log.info("alone")
        try bundle.close()
        let query = try LogQuery(sources: [path])
        func count(_ condition: String) throws -> QueryValue? {
            try query.rows("SELECT count(*) FROM records WHERE " + condition).first?.values.first
        }
        XCTAssertEqual(try count("arg1 IS NULL"), .integer(6), "NaN, redacted and missing read as NULL")
        XCTAssertEqual(try count("arg1 IS NULL AND args ->> 0 = 'nan'"), .integer(4), "NaN")
        XCTAssertEqual(try count("arg1 IS NULL AND json_type(args, '$[0]') = 'null'"), .integer(1), "redacted")
        XCTAssertEqual(try count("json_array_length(args) < 1"), .integer(1), "missing")
        XCTAssertEqual(try count("arg1 = 'nan'"), .integer(1), "the string \"nan\" is text")
        XCTAssertEqual(try count("typeof(arg1) = 'real' AND arg1 = 9e999"), .integer(1), "inf is REAL")
        let stats = try runProgram(try logbook(), ["stats", path])
        // stats counts the same NaNs per call site: 3 of Double, 1 of Float.
        XCTAssertTrue(stats.output.contains("nan 3") && stats.output.contains("nan 1"), stats.output)
    }

    /// `time` compared with text holding nanoseconds is those nanoseconds (as SQLite reads text
    /// against an INTEGER column); a blob is named as SQL writes one.
    func testTimeAsTextHoldingNanosecondsIsThoseAndABlobIsShownAsOne() throws {
        let path = makeTemporaryDirectory(self) + "/time.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 4096)
        try bundle.logger("x").info("one \(1)")
        try bundle.close()
        let query = try LogQuery(sources: [path])
        guard case .integer(let time)? = try query.rows("SELECT time FROM records").first?.values.first else {
            return XCTFail("no time")
        }
        for condition in ["time = '\(time)'", "time >= ' \(time) '", "time = '\(time)' OR 0"] {
            XCTAssertEqual(try query.rows("SELECT count(*) FROM records WHERE " + condition).first?.values, [.integer(1)], condition)
        }
        // A real written as text is read as SQLite reads it, pushed down or not.
        for condition in ["time < '\(time + 1).0'", "time >= '\(time - 300).5'", "time <= '1.7e18'"] {
            XCTAssertEqual(try query.rows("SELECT count(*) FROM records WHERE " + condition).first?.values,
                           try query.rows("SELECT count(*) FROM records WHERE \(condition) OR 0").first?.values, condition)
        }
        XCTAssertThrowsError(try query.rows("SELECT count(*) FROM records WHERE time = x'00ff1b'")) { error in
            XCTAssertTrue("\(error)".contains("time compared with x'00ff1b', which is neither"), "\(error)")
        }
        XCTAssertThrowsError(try query.rows("SELECT count(*) FROM records WHERE level >= x'41'")) { error in
            XCTAssertTrue("\(error)".contains("level compared with x'41', which is no level"), "\(error)")
        }
        XCTAssertThrowsError(try query.rows("SELECT count(*) FROM records WHERE time = 'o''clock'")) { error in
            XCTAssertTrue("\(error)".contains("time compared with 'o''clock'"), "\(error)")
        }
    }
}
