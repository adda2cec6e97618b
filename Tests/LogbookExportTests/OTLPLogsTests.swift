import Foundation
import LogbookTestKit
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
        XCTAssertEqual(typed("exception.type"), "string:LogbookExportTests.OTLPLogsTests.Failure")
        XCTAssertEqual(typed("exception.message"), "string:upstream \"closed\"\n")
        XCTAssertEqual(typed("code.file.path"), "string:LogbookExportTests/OTLPLogsTests.swift")
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
