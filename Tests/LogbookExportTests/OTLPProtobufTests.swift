import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookExport
import LogbookTesting

/// The protobuf encoding (`application/x-protobuf`, the default) against the JSON one: both bodies
/// of the same records parsed by the official definitions (Tests/Servers/otlp_compare.py) and
/// compared field by field.
final class OTLPProtobufTests: XCTestCase {
    func compare(_ entries: [LogEntry], _ encoding: OTLPLogsEncoding, observed: Int64 = 1_700_000_000_000_000_123) throws -> Int {
        try requireOTLPDefinitions()
        let dir = makeTemporaryDirectory(self)
        try Data(encoding.body(for: entries, observedNanoseconds: observed)).write(to: URL(fileURLWithPath: dir + "/body.json"))
        try Data(encoding.protobufBody(for: entries, observedNanoseconds: observed)).write(to: URL(fileURLWithPath: dir + "/body.pb"))
        let result = try runProgram("/usr/bin/env", ["python3", repositoryRoot + "/Tests/Servers/otlp_compare.py", dir + "/body.json", dir + "/body.pb"])
        XCTAssertEqual(result.status, 0, result.output)
        return Int(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String { "upstream \"closed\" — é" }
    }

    func testEveryKindOfRecordEncodesAsTheJSONDoes() throws {
        let capture = try LogCapture()
        let net = try capture.logger("net"), empty = try capture.logger(""), db = try capture.logger("db")
        let long = String(repeating: "x", count: 200), longer = String(repeating: "é", count: 20_000)
        net.error("request \(42) to \("hé\u{1}llo") took \(1.5) ms", metadata: [
            "status": 503, "ratio": 0.25, "cached": false, "path": "/v1", "tags": ["a", 2, ["nested": [1, 2]]],
            "peer": ["host": "10.0.0.1", "port": .init(UInt16(8080))], "id": .init(UInt64.max), "neg": .init(Int64.min),
            "": "empty key", "thread.id": "collides", "bytes": .init(bytes: [0, 1, 255]),
        ], error: Failure())
        empty.notice("\(long) \(longer)")
        db.trace("no arguments")
        db.info("float \(Float(0.1)) nan \(Double.nan) inf \(-Double.infinity) neg \(-7) big \(UInt64.max) flag \(true)")
        net.info("private \("secret", privacy: .private)", metadata: ["token": .private("t")])
        net.debug("", metadata: ["empty": ""])
        for i in 0..<300 { db.info("record \(i) with \(String(repeating: "y", count: i))", metadata: ["i": .init(i)]) }
        let entries = try capture.entries()
        XCTAssertEqual(try compare(entries, OTLPLogsEncoding(serviceName: "checkout", hostName: "h1", executableName: "app")), entries.count)
        XCTAssertEqual(try compare(entries, OTLPLogsEncoding(serviceName: "", hostName: "")), entries.count, "empty resource strings")
        XCTAssertEqual(try compare(Array(entries.prefix(1)), OTLPLogsEncoding(serviceName: "s"), observed: 0), 1)
        XCTAssertEqual(try compare([], OTLPLogsEncoding(serviceName: "s")), 0)
    }

    /// Trace context in metadata (swift-otel's `trace_id`, `span_id`, `trace_flags`, or a W3C
    /// `traceparent`) becomes the record's traceId, spanId and flags, in both encodings, and its
    /// keys are not attributes too; values that do not parse stay attributes.
    func testTraceContextBecomesTheRecordsTraceFields() throws {
        try requireOTLPDefinitions()
        let capture = try LogCapture()
        let log = try capture.logger("trace")
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736", span = "00f067aa0ba902b7"
        log.info("otel", metadata: ["trace_id": .init(trace), "span_id": .init(span), "trace_flags": "1", "user": "u"])
        log.info("otel without flags", metadata: ["trace_id": .init(trace.uppercased()), "span_id": .init(span)])
        log.info("integer flags", metadata: ["trace_id": .init(trace), "span_id": .init(span), "trace_flags": 1])
        log.info("w3c", metadata: ["traceparent": .init("00-\(trace)-\(span)-01")])
        log.info("not hex", metadata: ["trace_id": "xyz", "span_id": .init(span)])
        log.info("zero", metadata: ["trace_id": .init(String(repeating: "0", count: 32)), "span_id": .init(span)])
        log.info("version 01", metadata: ["traceparent": .init("01-\(trace)-\(span)-01")])
        log.info("none")
        let entries = try capture.entries()
        let dir = makeTemporaryDirectory(self)
        let encoding = OTLPLogsEncoding(serviceName: "s")
        try Data(encoding.body(for: entries, observedNanoseconds: 1)).write(to: URL(fileURLWithPath: dir + "/body.json"))
        try Data(encoding.protobufBody(for: entries, observedNanoseconds: 1)).write(to: URL(fileURLWithPath: dir + "/body.pb"))
        let result = try runProgram("/usr/bin/env", ["python3", repositoryRoot + "/Tests/Servers/otlp_compare.py", dir + "/body.json", dir + "/body.pb", "ids"])
        XCTAssertEqual(result.status, 0, result.output)
        var lines = result.output.split(separator: "\n").dropFirst().map { $0.split(separator: " ", omittingEmptySubsequences: false).map(String.init) }
        XCTAssertEqual(lines.count, 8, result.output)
        XCTAssertEqual(Array(lines.remove(at: 2).prefix(3)), [trace, span, "1"], "integer flags")
        // the attributes from metadata (the call site's and the thread's are every record's)
        func attributes(_ line: [String]) -> [String] {
            (line.count > 3 ? line[3].split(separator: ",").map(String.init) : []).filter { !$0.hasPrefix("code.") && $0 != "thread.id" }
        }
        XCTAssertEqual(Array(lines[0].prefix(3)), [trace, span, "1"])
        XCTAssertEqual(attributes(lines[0]), ["user"], "the trace keys are not attributes too")
        XCTAssertEqual(Array(lines[1].prefix(3)), [trace, span, "0"], "either case; no flags: 0")
        XCTAssertEqual(Array(lines[2].prefix(3)), [trace, span, "1"])
        XCTAssertEqual(attributes(lines[2]), [])
        for (index, kept) in [(3, ["span_id", "trace_id"]), (4, ["span_id", "trace_id"]), (5, ["traceparent"])] {
            XCTAssertEqual(Array(lines[index].prefix(3)), ["", "", "0"], "\(index)")
            XCTAssertEqual(attributes(lines[index]), kept, "\(index)")
        }
        XCTAssertEqual(Array(lines[6].prefix(3)), ["", "", "0"])
    }
}
