import Foundation
import XCTest
import Logbook
import LogbookExport
import LogbookTesting

/// OTLP/HTTP JSON bodies from log entries, parsed by the official
/// OpenTelemetry protobuf definitions (Tests/Servers/otlp_check.py: opentelemetry-proto's
/// json_format.Parse into ExportLogsServiceRequest, unknown fields refused) and checked field by
/// field with the types the protobuf message gives them.
final class OTLPLogsTests: XCTestCase {
    struct Failure: Error, CustomStringConvertible {
        var description: String { "upstream \"closed\"\n" }
    }

    func parsed(_ body: [UInt8]) throws -> [[String: Any]] {
        try requireOTLPDefinitions()
        let file = makeTemporaryDirectory(self) + "/body.json"
        try Data(body).write(to: URL(fileURLWithPath: file))
        let result = try runProgram("/bin/sh", ["-c", "python3 '\(repositoryRoot)/Tests/Servers/otlp_check.py' < '\(file)'"])
        XCTAssertEqual(result.status, 0, result.output)
        return try result.output.split(separator: "\n").map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    func testEveryFieldArrivesWithItsType() throws {
        let capture = try LogCapture()
        let net = try capture.logger("net")
        let db = try capture.logger("db")
        net.error("request \(42) to \("hé\u{1}llo") took \(1.5) ms", metadata: [
            "status": 503, "ratio": 0.25, "cached": false, "path": "/v1", "tags": ["a", 2],
            "peer": ["host": "10.0.0.1", "port": .init(UInt16(8080))], "id": .init(UInt64.max),
        ], error: Failure())
        db.notice("slow")
        net.trace("t")
        let entries = try capture.entries()
        let body = OTLPLogsEncoding(serviceName: "checkout", hostName: "h1", executableName: "app")
            .body(for: entries, observedNanoseconds: 1_700_000_000_000_000_123)
        let records = try parsed(body)
        XCTAssertEqual(records.count, 3)
        let first = records[0]
        XCTAssertEqual(first["scope"] as? String, "net")
        let resource = try XCTUnwrap(first["resource"] as? [String: [Any]])
        XCTAssertEqual(resource["service.name"]?.last as? String, "checkout")
        XCTAssertEqual(resource["host.name"]?.last as? String, "h1")
        XCTAssertEqual(resource["process.pid"]?.first as? String, "int")
        XCTAssertEqual(resource["process.pid"]?.last as? Int, Int(entries[0].processID))
        XCTAssertEqual(resource["process.executable.name"]?.last as? String, "app")
        XCTAssertEqual(first["time"] as? Int, Int(entries[0].wallNanoseconds))
        XCTAssertEqual(first["observed"] as? Int, 1_700_000_000_000_000_123)
        XCTAssertEqual(first["severityNumber"] as? Int, 17)
        XCTAssertEqual(first["severityText"] as? String, "ERROR")
        XCTAssertEqual((first["body"] as? [Any])?.last as? String, "request 42 to hé\u{1}llo took 1.5 ms")
        let attributes = try XCTUnwrap(first["attributes"] as? [String: [Any]])
        func typed(_ key: String) -> String { attributes[key].map { "\($0[0]):\($0[1])" } ?? "missing" }
        XCTAssertEqual(typed("status"), "int:503", "typed integers stay intValue")
        XCTAssertEqual(typed("ratio"), "double:0.25")
        XCTAssertEqual(typed("cached"), "bool:0")
        XCTAssertEqual(typed("path"), "string:/v1")
        XCTAssertEqual(typed("id"), "string:18446744073709551615", "past int64: its decimal text")
        XCTAssertEqual(typed("exception.type"), "string:LogbookTests.OTLPLogsTests.Failure")
        XCTAssertEqual(typed("exception.message"), "string:upstream \"closed\"\n")
        XCTAssertEqual(typed("code.file.path"), "string:LogbookTests/OTLPLogsTests.swift")
        XCTAssertEqual(typed("code.line.number"), "int:\(entries[0].line)")
        XCTAssertEqual(typed("thread.id"), "int:\(entries[0].threadID)")
        XCTAssertEqual(attributes["tags"]?.first as? String, "array")
        XCTAssertEqual(attributes["peer"]?.first as? String, "kvlist")
        let peer = try XCTUnwrap(attributes["peer"]?.last as? [String: [Any]])
        XCTAssertEqual(peer["port"]?.first as? String, "int")
        let arguments = try XCTUnwrap(attributes["logbook.arguments"]?.last as? [[Any]])
        XCTAssertEqual(arguments.map { $0[0] as? String }, ["int", "string", "double"])
        XCTAssertEqual([records[1]["scope"] as? String, records[2]["scope"] as? String], ["net", "db"],
                       "one scope per logger, in the order each first appears")
        XCTAssertEqual(records[2]["severityNumber"] as? Int, 10, "notice is INFO2")
        XCTAssertEqual(records[1]["severityNumber"] as? Int, 1, "trace is TRACE")
    }

    /// Metadata keys that a record's own fields use (thread.id, exception.type, code.*,
    /// logbook.arguments) or that are empty become `metadata.KEY`: every key of a record is unique
    /// and non-empty, as OpenTelemetry requires, and no value is dropped.
    func testMetadataKeysNeverCollideWithTheRecordsOwn() throws {
        let capture = try LogCapture()
        let log = try capture.logger("keys")
        struct Failure: Error {}
        log.error("failed \(1)", metadata: ["thread.id": 1, "exception.type": "mine", "code.line.number": 2,
                                             "logbook.arguments": "x", "": "empty", "metadata.thread.id": 3],
                  error: Failure())
        let records = try parsed(OTLPLogsEncoding(serviceName: "t", executableName: "app").body(for: try capture.entries(), observedNanoseconds: 1))
        let record = try XCTUnwrap(records.first)
        let keys = try XCTUnwrap(record["attributeKeys"] as? [String])
        XCTAssertEqual(keys.count, Set(keys).count, "unique: \(keys)")
        XCTAssertFalse(keys.contains(""))
        let attributes = try XCTUnwrap(record["attributes"] as? [String: [Any]])  // key: [type, value]
        XCTAssertEqual(attributes["metadata."]?.last as? String, "empty")
        XCTAssertEqual(attributes["metadata.exception.type"]?.last as? String, "mine")
        XCTAssertEqual((attributes["exception.type"]?.last as? String)?.hasSuffix("Failure"), true)
        XCTAssertEqual(keys.filter { $0.hasPrefix("metadata.") }.count, 6, "every metadata value kept: \(keys)")
        XCTAssertEqual(((record["resource"] as? [String: Any])?["process.executable.name"] as? [Any])?.last as? String, "app")
    }

    func testRedactedValuesStayRedacted() throws {
        let capture = try LogCapture()
        let log = try capture.logger("auth")
        let user = "alice@example.com"
        log.info("login by \(user, privacy: .private)", metadata: ["token": .private("secret-token")])
        let entries = try capture.entries()
        let body = OTLPLogsEncoding(serviceName: "s").body(for: entries, observedNanoseconds: 1)
        let text = String(decoding: body, as: UTF8.self)
        XCTAssertFalse(text.contains("alice") || text.contains("secret-token"), text)
        let record = try XCTUnwrap(try parsed(body).first)
        let attributes = try XCTUnwrap(record["attributes"] as? [String: [Any]])
        XCTAssertEqual(attributes["token"]?.last as? String, "<private>")
        XCTAssertEqual((record["body"] as? [Any])?.last as? String, "login by <private>")
        let syslog = String(decoding: SyslogFormat(hostname: "h", appName: "a").message(for: entries[0]).bytes, as: UTF8.self)
        XCTAssertFalse(syslog.contains("alice") || syslog.contains("secret-token"), syslog)
    }
}

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
