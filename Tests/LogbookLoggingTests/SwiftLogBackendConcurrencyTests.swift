import Foundation
import LogbookTestKit
import Logging
import XCTest
@testable import Logbook
@testable import LogbookLogging
import LogbookTesting

/// The swift-log backend, exercised through swift-log's own `Logger` as a library would.
final class SwiftLogBackendConcurrencyTests: XCTestCase {
    struct FetchError: Error, CustomStringConvertible {
        var code: Int
        var description: String { "fetch failed with \(code)" }
    }

    func makeLogger(_ capture: LogCapture, _ label: String, metadataProvider: Logging.Logger.MetadataProvider? = nil) -> Logging.Logger {
        Logging.Logger(label: label) { label in
            LogbookLogHandler(label: label, bundle: capture.bundle, logLevel: .trace, metadataProvider: metadataProvider)
        }
    }

    /// swift-log's value-semantics test (LogHandler.swift of swift-log 1.16), with our handler.
    func testLogHandlerValueSemantics() throws {
        let capture = try LogCapture()
        var logger1 = makeLogger(capture, "first logger")
        logger1.logLevel = .debug
        logger1[metadataKey: "only-on"] = "first"

        var logger2 = logger1
        logger2.logLevel = .error
        logger2[metadataKey: "only-on"] = "second"

        XCTAssertEqual(logger1.logLevel, .debug)
        XCTAssertEqual(logger2.logLevel, .error)
        XCTAssertEqual(logger1[metadataKey: "only-on"], "first")
        XCTAssertEqual(logger2[metadataKey: "only-on"], "second")

        logger1.debug("one")
        logger2.debug("dropped by logger2's own level")
        logger2.error("two")
        try capture.expect(.debug, logger: "first logger", message: "one", metadata: ["only-on": "first"])
        try capture.expect(.error, message: "two", metadata: ["only-on": "second"])
        XCTAssertEqual(try capture.entries().count, 2)
    }

    func testRecordKeepsLevelLabelMessageTypedMetadataErrorAndCallSite() throws {
        let capture = try LogCapture()
        var logger = makeLogger(capture, "net.http")
        logger[metadataKey: "service"] = "api"
        let line = #line + 1
        logger.warning(
            "request \(42) failed", error: FetchError(code: 503),
            metadata: [
                "status": .stringConvertible(503), "latency": .stringConvertible(1.25), "cached": .stringConvertible(false),
                "path": "/v1/items", "tags": ["a", .stringConvertible(2)], "peer": ["host": "10.0.0.1", "port": .stringConvertible(8080)],
            ])
        let entry = try capture.expect(.warning, logger: "net.http")
        XCTAssertEqual(entry.message, "request 42 failed")
        XCTAssertEqual(entry.metadata["status"], .value(.signed(503, .int)))
        XCTAssertEqual(entry.metadata["latency"], .value(.double(1.25)))
        XCTAssertEqual(entry.metadata["cached"], .value(.bool(false)))
        XCTAssertEqual(entry.metadata["path"]?.string, "/v1/items")
        XCTAssertEqual(entry.metadata["service"]?.string, "api")
        XCTAssertEqual(entry.metadata["tags"], .list([.value(.string("a", isStatic: false)), .value(.signed(2, .int))]))
        XCTAssertEqual(entry.metadata["peer"]?.description, "{host=10.0.0.1, port=8080}")
        XCTAssertEqual(entry.metadata.map(\.key), ["cached", "latency", "path", "peer", "service", "status", "tags"])
        XCTAssertEqual(entry.error, LoggedError(type: "LogbookLoggingTests.SwiftLogBackendConcurrencyTests.FetchError", description: "fetch failed with 503"))
        XCTAssertEqual(entry.source, "LogbookLoggingTests")
        XCTAssertEqual(entry.file, "LogbookLoggingTests/SwiftLogBackendConcurrencyTests.swift")
        XCTAssertEqual(entry.line, UInt32(line))
        XCTAssertEqual(entry.function, "testRecordKeepsLevelLabelMessageTypedMetadataErrorAndCallSite()")

        XCTAssertTrue(
            entry.textLine().hasSuffix(
                "warning  net.http: request 42 failed cached=false latency=1.25 path=/v1/items "
                    + "peer={host=10.0.0.1, port=8080} service=api status=503 tags=[a, 2] "
                    + "error=LogbookLoggingTests.SwiftLogBackendConcurrencyTests.FetchError: fetch failed with 503"), entry.textLine())
        let json = try JSONSerialization.jsonObject(with: Data(entry.jsonLine().utf8)) as! [String: Any]
        let metadata = try XCTUnwrap(json["metadata"] as? [String: Any])
        XCTAssertEqual(metadata["status"] as? Int, 503)
        XCTAssertEqual(metadata["cached"] as? Bool, false)
        XCTAssertEqual((metadata["peer"] as? [String: Any])?["port"] as? Int, 8080)
        XCTAssertEqual((metadata["tags"] as? [Any])?.count, 2)
        XCTAssertEqual((json["error"] as? [String: String])?["description"], "fetch failed with 503")
        XCTAssertEqual(json["source"] as? String, "LogbookLoggingTests")
    }

    func testMetadataPrecedenceHandlerThenProviderThenCall() throws {
        let capture = try LogCapture()
        let provider = Logging.Logger.MetadataProvider { ["request": "from-provider", "trace": "t1"] }
        var logger = makeLogger(capture, "svc", metadataProvider: provider)
        logger[metadataKey: "request"] = "from-handler"
        logger[metadataKey: "node"] = "n1"
        logger.info("a")
        logger.info("b", metadata: ["request": "from-call"])
        let a = try capture.expect(message: "a")
        XCTAssertEqual(a.metadata.description, "{node=n1, request=from-provider, trace=t1}")
        let b = try capture.expect(message: "b")
        XCTAssertEqual(b.metadata.description, "{node=n1, request=from-call, trace=t1}")
    }

    func testEachCallSiteIsStoredOnceAndExplicitSourceIsKept() throws {
        let capture = try LogCapture()
        let logger = makeLogger(capture, "loop")
        for index in 0..<100 { logger.info("n=\(index)") }
        logger.info("from elsewhere", source: "Custom")
        let entries = try capture.entries()
        XCTAssertEqual(entries.count, 101)
        XCTAssertEqual(Set(entries.prefix(100).map(\.line)).count, 1)
        XCTAssertEqual(entries.last?.source, "Custom")
        XCTAssertNotEqual(entries.last?.line, entries.first?.line)
        // One site entry for the loop's call, one for the other call.
        let meta = try Data(contentsOf: URL(fileURLWithPath: capture.path + "/meta"))
        XCTAssertEqual(meta.count(of: Array("SwiftLogBackendConcurrencyTests.swift".utf8)), 2)
    }

    /// A site is found by the bytes of immortal strings (literals, small strings) and by the text
    /// of any other: the same line with and without a source, with sources that change from call to
    /// call (literal, small, built at run time), and files and functions built at run time (one of
    /// them freed and another built at the same address with other text) each record what the call
    /// gave; and the layout read that avoids deriving the source was checked and is in use.
    func testSiteIdentityFollowsTheCallsStringsWhateverTheirKind() throws {
        XCTAssertNotNil(SwiftLogEventLayout.sourceOffset)
        XCTAssertTrue(StringBits.isUsable)
        let capture = try LogCapture()
        let logger = makeLogger(capture, "ident")
        var expected: [(message: String, source: String, file: String, function: String)] = []
        for round in 0..<3 {
            let dynamicSource = "Generated" + String(repeating: "s", count: 20 + round)
            let sources: [String?] = [nil, "Custom", "A-source-longer-than-fifteen-bytes", dynamicSource, "", nil]
            for (index, source) in sources.enumerated() {
                let message = "r\(round) s\(index)"
                logger.info("\(message)", source: source)  // one line: the same file, function and line
                expected.append((message, source ?? "LogbookLoggingTests", "LogbookLoggingTests/SwiftLogBackendConcurrencyTests.swift",
                                 "testSiteIdentityFollowsTheCallsStringsWhateverTheirKind()"))
            }
            for index in 0..<4 {
                // Heap strings, freed after the call; the next ones may reuse their memory.
                let file = "Built/" + String(repeating: "f", count: 30) + "\(index % 2).swift"
                let function = "function" + String(repeating: "x", count: 30) + "\(index)()"
                let message = "r\(round) built \(index)"
                logger.info("\(message)", file: file, function: function, line: 9)
                expected.append((message, "Built", file, function))
            }
        }
        let entries = try capture.entries(logger: "ident")
        XCTAssertEqual(entries.count, expected.count)
        for (entry, want) in zip(entries, expected) {
            XCTAssertEqual(entry.message, want.message)
            XCTAssertEqual(entry.source, want.source.isEmpty ? nil : want.source, want.message)  // "" reads as none
            XCTAssertEqual(entry.file, want.file, want.message)
            XCTAssertEqual(entry.function, want.function, want.message)
        }
        XCTAssertEqual(LogReader.issueCount(capture.path), 0)
    }

    @available(*, deprecated)
    func testEarlierEntryPointRecordsTheSame() throws {
        let capture = try LogCapture()
        let handler = LogbookLogHandler(label: "old", bundle: capture.bundle)
        handler.log(
            level: .notice, message: "legacy \(1)", metadata: ["k": "v"], source: "OldModule", file: "Old/File.swift",
            function: "f()", line: 7)
        let entry = try capture.expect(.notice, logger: "old", message: "legacy 1", metadata: ["k": "v"])
        XCTAssertEqual(entry.source, "OldModule")
        XCTAssertEqual(entry.file, "Old/File.swift")
        XCTAssertEqual(entry.line, 7)
    }

    /// Bootstrapped as the README shows, the handler records from `.info` up, as swift-log's own
    /// handlers: a framework's trace and debug lines are not recorded unless asked for.
    func testTheHandlerRecordsFromInfoUpByDefault() throws {
        let capture = try LogCapture()
        let logger = Logging.Logger(label: "framework") { LogbookLogHandler(label: $0, bundle: capture.bundle) }
        XCTAssertEqual(logger.logLevel, .info)
        logger.trace("request lifecycle")
        logger.debug("router matched")
        logger.info("request done")
        XCTAssertEqual(try capture.entries().map(\.message), ["request done"])
        var verbose = logger
        verbose.logLevel = .trace
        verbose.debug("asked for")
        try capture.expect(.debug, logger: "framework", message: "asked for")
    }

    func testFilterAppliesToLabelsAndSkipsTheMessage() throws {
        let capture = try LogCapture(filter: try LogFilter(parsing: "chatty=off,net=warning"))
        let chatty = makeLogger(capture, "chatty.module")
        let net = makeLogger(capture, "net")
        var evaluated = 0
        func expensive() -> String {
            evaluated += 1
            return "expensive"
        }
        chatty.error("\(expensive())")
        net.info("\(expensive())")
        net.warning("kept")
        XCTAssertEqual(evaluated, 0, "a filtered-out swift-log call built its message")
        // swift-log has no level above critical: a label that is off still builds a critical
        // message, which the handler then drops.
        chatty.critical("dropped")
        XCTAssertEqual(net.logLevel, .warning)
        XCTAssertEqual(try capture.entries().map(\.message), ["kept"])

        capture.bundle.setLevel(.debug, for: "net")  // at run time, for the existing logger
        XCTAssertEqual(net.logLevel, .debug)
        net.debug("now recorded")
        try capture.expect(.debug, logger: "net", message: "now recorded")
    }

    func testHandlerMetadataDeeperThanTheFormatIsStoredAsText() throws {
        let capture = try LogCapture()
        let logger = makeLogger(capture, "deep")
        var value: Logging.Logger.MetadataValue = "leaf"
        for _ in 0..<12 { value = .dictionary(["d": value]) }
        logger.info("deep", metadata: ["root": value])
        let entry = try capture.expect(message: "deep")
        XCTAssertTrue(entry.metadata["root"]?.description.contains("leaf") ?? false, "\(entry.metadata)")
        XCTAssertEqual(LogReader.issueCount(capture.path), 0)
    }
}

extension Data {
    func count(of needle: [UInt8]) -> Int {
        var count = 0
        var start = startIndex
        while let range = self[start...].firstRange(of: needle) {
            count += 1
            start = range.upperBound
        }
        return count
    }
}
