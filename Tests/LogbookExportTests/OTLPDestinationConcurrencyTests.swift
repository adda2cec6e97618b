import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookExport
import LogbookTesting
import LogbookUpload

/// OTLP/HTTP delivery against Tests/Servers/otlp_server.py on
/// 127.0.0.1, which parses every body with opentelemetry-proto: 503 with Retry-After, 429 and a
/// reset are retried, 400 and 500 are not (reported with the server's message), a partial success
/// is counted, not retried.
final class OTLPDestinationConcurrencyTests: XCTestCase {
    func server() throws -> UploadServer {
        try requireOTLPDefinitions()
        return try UploadServer(directory: makeTemporaryDirectory(self), script: "otlp_server.py")
    }

    func body() throws -> [UInt8] {
        let capture = try LogCapture()
        let log = try capture.logger("net")
        for i in 0..<5 { log.info("request \(i) done", metadata: ["status": 200]) }
        return OTLPLogsEncoding(serviceName: "test").encode(try capture.entries(), observedNanoseconds: 1)  // protobuf, as the destination says
    }

    let quick = RetryPolicy(retryableStatuses: [429, 502, 503, 504], baseDelay: .milliseconds(20), maxDelay: .milliseconds(100))

    func testRetriedFaultsEndDelivered() async throws {
        let server = try server()
        // A timeout no attempt meets on a loaded machine: one that did would add an attempt.
        let destination = OTLPDestination(url: server.url("/s/503ra1,429,reset,502/v1/logs"), policy: quick, timeout: .seconds(120))
        let start = Date()
        let delivery = await destination.deliver(try body())
        XCTAssertEqual(delivery, .delivered(attempts: 5, rejected: 0, message: nil))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 1.0, "Retry-After: 1 honoured")
        let requests = server.requests()
        XCTAssertEqual(requests.map { $0["answer"] as? String }, ["503ra1", "429", "reset", "502", "ok"])
        XCTAssertEqual(requests.map { $0["attempt"] as? String }, ["1", "2", "3", "4", "5"])
        let last = try XCTUnwrap(requests.last)
        XCTAssertEqual(last["parsed"] as? Bool, true)
        XCTAssertEqual((last["records"] as? [Any])?.count, 5)
    }

    func testNotRetriedStatusesAreReportedWithTheServersMessage() async throws {
        let server = try server()
        let bad = await OTLPDestination(url: server.url("/s/400/v1/logs"), policy: quick).deliver(try body())
        XCTAssertEqual(bad, .gaveUp(attempts: 1, reason: "HTTP 400: attribute key too long"))
        let serverError = await OTLPDestination(url: server.url("/s/500/v1/logs"), policy: quick).deliver(try body())
        XCTAssertEqual(serverError, .gaveUp(attempts: 1, reason: "HTTP 500"), "OTLP does not retry 500")
        XCTAssertEqual(server.requests().count, 2)
    }

    func testAPartialSuccessIsCountedNotRetried() async throws {
        let server = try server()
        let delivery = await OTLPDestination(url: server.url("/s/partial3/v1/logs"), policy: quick).deliver(try body())
        XCTAssertEqual(delivery, .delivered(attempts: 1, rejected: 3, message: "too old"))
        XCTAssertEqual(server.requests().count, 1)
    }

    func testGzippedBodies() async throws {
        let server = try server()
        let plain = try body()
        let delivery = await OTLPDestination(url: server.url("/v1/logs"), policy: quick, gzipLevel: 6).deliver(plain)
        XCTAssertEqual(delivery, .delivered(attempts: 1, rejected: 0, message: nil))
        let request = try XCTUnwrap(server.requests().first)
        XCTAssertEqual(request["encoding"] as? String, "gzip")
        XCTAssertEqual(request["parsed"] as? Bool, true)
        XCTAssertEqual((request["records"] as? [Any])?.count, 5)
        XCTAssertLessThan(try XCTUnwrap(request["bytes"] as? Int), plain.count / 3, "gzip makes the JSON much smaller")
    }

    /// zstd bodies (`Content-Encoding: zstd`), decompressed by the collector through libzstd, and
    /// the `logbook export --zstd` that sends them: every record arrives, with its values.
    func testZstdBodies() async throws {
        let server = try server()
        let plain = try body()
        let delivery = await OTLPDestination(url: server.url("/v1/logs"), policy: quick, compression: .zstd(level: 1)).deliver(plain)
        XCTAssertEqual(delivery, .delivered(attempts: 1, rejected: 0, message: nil))
        let request = try XCTUnwrap(server.requests().first)
        XCTAssertEqual(request["encoding"] as? String, "zstd")
        XCTAssertEqual(request["parsed"] as? Bool, true)
        XCTAssertEqual((request["records"] as? [Any])?.count, 5)
        XCTAssertLessThan(try XCTUnwrap(request["bytes"] as? Int), plain.count / 3, "zstd makes the JSON much smaller")

        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let source = try makeBundle(dir, records: 700)
        let run = try runProgram(logbook, ["export", "--otlp", server.url("/cli/v1/logs").absoluteString, "--zstd", "--batch", "200",
                                           "--cursors", dir + "/cursors", source])
        XCTAssertEqual(run.status, 0, run.output)
        XCTAssertTrue(run.output.contains("exported 700 records"), run.output)
        let sent = server.requests().dropFirst()
        XCTAssertEqual(sent.count, 4)
        XCTAssertTrue(sent.allSatisfy { $0["encoding"] as? String == "zstd" && $0["parsed"] as? Bool == true }, "\(sent)")
        let bodies = sent.flatMap { ($0["records"] as? [[String: Any]]) ?? [] }.compactMap { $0["body"] as? String }
        XCTAssertEqual(bodies.count, 700)
        XCTAssertEqual(Set(bodies).count, 700)
        let both = try runProgram(logbook, ["export", "--otlp", server.url("/v1/logs").absoluteString, "--zstd", "--gzip", source])
        XCTAssertNotEqual(both.status, 0)
        XCTAssertTrue(both.output.contains("give one of --gzip and --zstd"), both.output)
    }

    func testABodyTheCollectorCannotParseIsNotRetried() async throws {
        let server = try server()
        let delivery = await OTLPDestination(url: server.url("/v1/logs"), policy: quick).deliver(Array("{\"resourceLogs\":[{\"nope\":1}]}".utf8))
        guard case .gaveUp(1, let reason) = delivery else { return XCTFail("\(delivery)") }
        XCTAssertTrue(reason.hasPrefix("HTTP 400: not an ExportLogsServiceRequest"), reason)
    }
}
