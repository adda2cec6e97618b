import Foundation
import XCTest
import Logbook
import LogbookExport
import LogbookTesting

/// RFC 5424 messages from log entries: header fields within their
/// limits, PRI from the level, timestamps with microseconds, structured data escaped, the BOM
/// before a non-ASCII MSG, octet-counting framing, and truncation at a character boundary with a marker.
final class SyslogFormatTests: XCTestCase {
    struct Failure: Error, CustomStringConvertible {
        var description: String { "bad \"quote\" ] and \\ backslash" }
    }

    func entry(_ body: (Logger) -> Void) throws -> LogEntry {
        let capture = try LogCapture()
        let log = try capture.logger("net http]=\"x\"-a-logger-name-longer-than-thirty-two")
        body(log)
        return try XCTUnwrap(capture.entries().last)
    }

    func testAMessageFollowsTheGrammar() throws {
        let entry = try entry { log in
            log.error("request \(42) to \("héllo") failed", metadata: ["status": 503, "peer": ["host": "a]b\"c"]], error: Failure())
        }
        let format = SyslogFormat(facility: 16, hostname: "host with space", appName: "app", maximumBytes: 8096)
        let (bytes, truncated) = format.message(for: entry)
        XCTAssertFalse(truncated)
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("<131>1 "), text)  // local0 (16) * 8 + error (3)
        let fields = text.split(separator: " ", maxSplits: 6, omittingEmptySubsequences: false)
        XCTAssertEqual(fields[2], "host?with?space")
        XCTAssertEqual(fields[3], "app")
        XCTAssertEqual(fields[4], Substring(String(entry.processID)))
        XCTAssertEqual(fields[5], "net?http]=\"x\"-a-logger-name-long", "MSGID: 32 PRINTUSASCII octets at most")
        let stamp = String(fields[1])
        XCTAssertEqual(stamp.count, "2026-11-24T04:31:21.123456Z".count, stamp)
        XCTAssertEqual(stamp, SyslogFormatTimestamp(entry.wallNanoseconds))
        XCTAssertTrue(text.contains(#"error.message="bad \"quote\" \] and \\ backslash""#), text)
        XCTAssertTrue(text.contains(#"[meta@32473 peer.host="a\]b\"c" status="503"]"#), text)
        XCTAssertTrue(bytes.suffix(from: bytes.count - "request 42 to héllo failed".utf8.count - 3).starts(with: [0xEF, 0xBB, 0xBF]),
                      "a UTF-8 MSG starts with the BOM")
        XCTAssertTrue(text.hasSuffix("request 42 to héllo failed"))
        let framed = format.frame(for: entry).bytes
        XCTAssertEqual(framed, Array("\(bytes.count) ".utf8) + bytes)
    }

    func testALongMessageIsCutAtACharacterWithAMarker() throws {
        let long = String(repeating: "é", count: 5000)
        let entry = try entry { log in log.info("\(long)") }
        let format = SyslogFormat(hostname: "h", appName: "a", maximumBytes: 1000)
        let (bytes, truncated) = format.message(for: entry)
        XCTAssertTrue(truncated)
        XCTAssertLessThanOrEqual(bytes.count, 1000)
        let text = try XCTUnwrap(String(validating: bytes, as: UTF8.self), "still valid UTF-8")
        XCTAssertTrue(text.hasSuffix("é…[truncated]"), String(text.suffix(20)))
    }

    func testSeverityFollowsTheLevels() {
        XCTAssertEqual([LogLevel.trace, .debug, .info, .notice, .warning, .error, .critical].map(SyslogFormat.severity),
                       [7, 7, 6, 5, 4, 3, 2])
    }
}

/// The timestamp the formatter must write, computed another way (Foundation's formatter).
func SyslogFormatTimestamp(_ nanoseconds: Int64) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "UTC")
    formatter.dateFormat = "yyyy-MM-dd'T'HH:mm:ss"
    let seconds = nanoseconds / 1_000_000_000
    let micros = (nanoseconds % 1_000_000_000) / 1000
    let text = String(micros)
    return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds))) + "."
        + String(repeating: "0", count: 6 - text.count) + text + "Z"
}
