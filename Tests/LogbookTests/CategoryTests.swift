import Foundation
import LogbookTestKit
import XCTest
@testable @_spi(LogbookBackend) import Logbook
import CLogbook
import LogbookTesting

/// Categories of the tests below: a type's own name, and one named explicitly.
struct Connection: LogCategory {
    func open(_ fd: Int32) { logger.info("opening \(fd)") }
}

enum Storage: LogCategory {
    static let logCategory = "db.storage"
    static func flush() { logger.notice("flushed \(3) pages") }
}

/// `LogCategory`: types log under their category, which a filter can silence.
final class CategoryTests: XCTestCase {
    /// Category loggers use the process-wide shared bundle, so these steps run in one test.
    func testTypesLogUnderTheirCategoryAndCanBeSilenced() throws {
        Connection().open(1)  // before any bootstrap of this test: recorded in whatever is shared
        let capture = try LogCapture()
        LogBundle.bootstrap(capture.bundle)
        XCTAssertTrue(LogBundle.shared === capture.bundle)
        XCTAssertEqual(Connection.logCategory, "LogbookTests.Connection")

        Connection().open(7)
        Storage.flush()
        try capture.expect(.info, logger: "LogbookTests.Connection", message: "opening 7")
        let flushed = try capture.expect(.notice, logger: "db.storage", message: "flushed 3 pages")
        XCTAssertEqual(flushed.source, "LogbookTests")

        // Silence a type from code, then a whole module by the filter.
        Connection.logger.minimumLevel = nil
        Connection().open(8)
        try capture.expectNone(message: "opening 8")
        capture.bundle.filter = try LogFilter(parsing: "LogbookTests=off")
        Connection().open(9)
        Storage.flush()
        XCTAssertEqual(try capture.entries(logger: "db.storage").count, 2, "db.storage is not in the module's hierarchy")
        try capture.expectNone(message: "opening 9")

        // A new bootstrap moves every category to the new bundle.
        let second = try LogCapture()
        LogBundle.bootstrap(second.bundle)
        Connection().open(10)
        try second.expect(message: "opening 10")
        try capture.expectNone(message: "opening 10")
    }

    func testCategoryLoggerBeforeAnyBundleRecordsNothing() {
        let detached = Logger.detached
        XCTAssertNil(detached.bundle)
        XCTAssertNil(detached.minimumLevel)
        detached.minimumLevel = .trace
        XCTAssertNil(detached.minimumLevel, "a logger of no bundle stays off")
        detached.critical("goes nowhere \(1)")
    }
}
