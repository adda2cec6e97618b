import Foundation
import LogbookTestKit
import XCTest
@testable @_spi(LogbookBackend) import Logbook
import CLogbook
import LogbookTesting

/// Runtime filters: parsing, matching, changes at run time, the environment, and categories.
final class FilterTests: XCTestCase {
    func testParsesRulesAndReportsMalformedOnesClearly() throws {
        let filter = try LogFilter(parsing: " net=debug, db=OFF ,*=info,,pre*=warn ")
        XCTAssertEqual(filter.rules, [.init("net", .debug), .init("db", nil), .init("*", .info), .init("pre*", .warning)])
        XCTAssertEqual(filter.description, "net=debug,db=off,*=info,pre*=warning")
        XCTAssertEqual(try LogFilter(parsing: "error").rules, [.init("*", .error)])
        XCTAssertEqual(try LogFilter(parsing: "").rules, [])

        func failure(_ spec: String) -> LogFilter.SyntaxError? {
            do {
                _ = try LogFilter(parsing: spec)
                return nil
            } catch { return error }
        }
        let unknown = try XCTUnwrap(failure("net=debug,db=verbose"))
        XCTAssertEqual(unknown.offset, 13)
        XCTAssertEqual(unknown.message, "unknown level 'verbose' (levels: trace, debug, info, notice, warning, error, critical or off)")
        XCTAssertEqual(
            unknown.description,
            "invalid log filter \"net=debug,db=verbose\" at byte 13: unknown level 'verbose' (levels: trace, debug, info, notice, warning, error, critical or off)")
        XCTAssertEqual(failure("=debug")?.message, "rule '=debug' has no logger name before '='")
        XCTAssertEqual(failure("net")?.message, "'net' is neither a level nor a rule pattern=level (levels: trace, debug, info, notice, warning, error, critical or off)")
        XCTAssertEqual(failure("a*b=info")?.message, "rule 'a*b=info': a logger name has no spaces, and '*' only at its end")
        XCTAssertEqual(failure("my net=info")?.offset, 0)
        XCTAssertEqual(failure("net=info=debug")?.message, "rule 'net=info=debug' has more than one '='")
        XCTAssertEqual(failure("net=info,db=off,net=debug")?.message, "logger 'net' has two rules; keep one")
        XCTAssertEqual(failure("info,*=debug")?.message, "logger '*' has two rules; keep one")
    }

    func testMostSpecificRuleWinsForExistingAndNewLoggers() throws {
        let capture = try LogCapture()
        let bundle = capture.bundle
        let network = try capture.logger("network")
        bundle.filter = try LogFilter(parsing: "net=debug,net.http=error,db=off,*=info,netw*=warning")
        func level(_ name: String) throws -> LogLevel? { try bundle.logger(name).minimumLevel }
        XCTAssertEqual(try level("net"), .debug)
        XCTAssertEqual(try level("net.tcp"), .debug, "a name covers the loggers below it")
        XCTAssertEqual(try level("net.http"), .error)
        XCTAssertEqual(try level("net.http.client"), .error)
        XCTAssertEqual(try level("db"), nil)
        XCTAssertEqual(network.minimumLevel, .warning, "the prefix rule beats '*', and applies to a logger made before")
        XCTAssertEqual(try level("netx"), .info, "'net' is not a prefix of 'netx' in the hierarchy")
        XCTAssertEqual(try level("other"), .info)
        XCTAssertEqual(bundle.filter.description, "net=debug,net.http=error,db=off,*=info,netw*=warning")

        // Changing one rule at run time, and from a logger.
        bundle.setLevel(.trace, for: "db")
        XCTAssertEqual(try level("db"), .trace)
        try bundle.logger("net.http").minimumLevel = .notice
        XCTAssertEqual(try level("net.http.client"), .notice)
        bundle.removeFilterRule(for: "net.http")
        XCTAssertEqual(try level("net.http"), .debug)
        // A name no filter string can hold is still set, read back and applied exactly.
        bundle.setLevel(.critical, for: "my logger, v2")
        XCTAssertEqual(try level("my logger, v2"), .critical)
        XCTAssertEqual(bundle.filter.rules.last, .init("my logger, v2", .critical))
        let kept = bundle.filter
        bundle.filter = LogFilter()
        XCTAssertEqual(try level("db"), .trace, "no rules: everything is recorded")
        bundle.filter = kept
        XCTAssertEqual(try level("my logger, v2"), .critical)
        XCTAssertEqual(bundle.filter, kept)
    }

    func testFilteredOutCallIsDroppedWithoutBuildingItsMessage() throws {
        let capture = try LogCapture(filter: try LogFilter(parsing: "quiet=off,*=info"))
        let quiet = try capture.logger("quiet")
        let main = try capture.logger("main")
        var evaluated = 0
        func expensive() -> Int {
            evaluated += 1
            return 1
        }
        quiet.critical("never \(expensive())")
        main.debug("below info \(expensive())")
        main.info("kept \(expensive())")
        XCTAssertEqual(evaluated, 1)
        XCTAssertEqual(try capture.entries().map(\.message), ["kept 1"])
        XCTAssertEqual(capture.bundle.counters.dropped, 0, "filtered calls are not drops")
    }

    func testEnvironmentFilterAppliesAtOpenOnTopOfCodeAndMalformedOnesAreIgnoredWithAWarning() throws {
        let directory = makeTemporaryDirectory(self)
        setenv("LOGBOOK_FILTER", "db=off,net=error", 1)
        defer { unsetenv("LOGBOOK_FILTER") }
        do {
            let bundle = try LogBundle(
                path: directory + "/env.logbook", capacity: 1 << 20, chunkSize: 16 << 10,
                filter: try LogFilter(parsing: "net=debug,*=info"))
            XCTAssertNil(bundle.environmentFilterWarning)
            XCTAssertEqual(try bundle.logger("db").minimumLevel, nil)
            XCTAssertEqual(try bundle.logger("net").minimumLevel, .error, "the environment wins for the same pattern")
            XCTAssertEqual(try bundle.logger("x").minimumLevel, .info)
            XCTAssertEqual(try LogFilter.fromEnvironment()?.description, "db=off,net=error")
            try bundle.close()
        }
        setenv("LOGBOOK_FILTER", "db=of", 1)
        let bundle = try LogBundle(path: directory + "/bad.logbook", capacity: 1 << 20, chunkSize: 16 << 10)
        XCTAssertEqual(
            bundle.environmentFilterWarning,
            "LOGBOOK_FILTER ignored: unknown level 'of' (levels: trace, debug, info, notice, warning, error, critical or off) (at byte 3 of \"db=of\")")
        XCTAssertEqual(try bundle.logger("db").minimumLevel, .trace, "the malformed filter changed nothing")
        XCTAssertThrowsError(try LogFilter.fromEnvironment())
        let ignoring = try LogBundle(
            path: directory + "/ignore.logbook", capacity: 1 << 20, chunkSize: 16 << 10, applyEnvironmentFilter: false)
        XCTAssertNil(ignoring.environmentFilterWarning)
    }

    func testCProgramsGetTheFilterThroughTheCAPI() throws {
        let capture = try LogCapture()
        let raw = capture.bundle.cBundle
        var error = lb_filter_error()
        XCTAssertEqual(lb_bundle_set_filter(raw, "c=warning", &error), 0)
        var control: UnsafeMutablePointer<lb_logger>?
        XCTAssertEqual(lb_logger_register(raw, "c.module", &control), 0)
        XCTAssertFalse(lb_logger_enabled(control, UInt8(LB_LEVEL_INFO.rawValue)))
        XCTAssertTrue(lb_logger_enabled(control, UInt8(LB_LEVEL_WARNING.rawValue)))
        XCTAssertEqual(lb_bundle_set_filter(raw, "c=loud", &error), -EINVAL)
        XCTAssertEqual(LogFilter.message(of: &error), "unknown level 'loud' (levels: trace, debug, info, notice, warning, error, critical or off)")
        XCTAssertTrue(lb_logger_enabled(control, UInt8(LB_LEVEL_WARNING.rawValue)), "a rejected filter changes nothing")
        XCTAssertFalse(lb_logger_enabled(control, UInt8(LB_LEVEL_INFO.rawValue)))
    }
}

// MARK: - categories
