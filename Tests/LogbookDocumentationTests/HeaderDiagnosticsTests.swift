import Foundation
import LogbookTestKit
import XCTest

/// A package that depends on Logbook imports its C headers into Swift: every logging call inlines
/// `lb_record_commit` and the record writers of `logbook.h`. They must import without a note or a
/// warning (a cast to an `_Atomic` pointer printed "built-in type 'Atomic' not supported" into
/// every client's build, four times).
final class HeaderDiagnosticsTests: XCTestCase {
    func testClientCodeCompilesWithoutDiagnosticsFromLogbooksHeaders() throws {
        let modules = try BuiltModules.find()
        let client = """
            import Logbook
            import LogbookLogging
            import Logging

            struct Timeout: Error {}
            let bundle = try LogBundle(path: "/tmp/client.logbook")
            let log = try bundle.logger("client")
            let id = 42, ms = 2.5, ok = true, path = "/items"
            log.info("request \\(id) took \\(ms) ms ok=\\(ok) path \\(path)")
            log.warning("slow", metadata: ["path": "\\(path)", "status": 503])
            log.error("failed", error: Timeout())
            LogbookLogHandler.bootstrap(bundle)
            let swiftLog = Logging.Logger(label: "api")
            swiftLog.info("via swift-log", metadata: ["id": "\\(id)"])
            """
        // Compiled with optimization, as a release build of a client: only then are Logger's
        // inlinable paths inlined into the client, and with them the C functions of logbook.h
        // (type-checking alone, or -Onone, never imports them: the notes did not show).
        let directory = makeTemporaryDirectory(self)
        try client.write(toFile: directory + "/main.swift", atomically: true, encoding: .utf8)
        let result = try runProgram(
            modules.swiftc, ["-O", "-c", directory + "/main.swift", "-o", directory + "/main.o"] + modules.arguments)
        XCTAssertEqual(result.status, 0, result.output)
        let fromHeaders = result.output.split(separator: "\n").filter {
            $0.contains("CSources/") || $0.contains("logbook.h") || $0.contains("logbook_format.h")
        }
        XCTAssertEqual(fromHeaders, [], "diagnostics from Logbook's headers:\n\(result.output)")
        XCTAssertFalse(result.output.contains("warning:"), result.output)
        XCTAssertFalse(result.output.contains("note:"), result.output)
    }
}
