import Foundation
import LogbookTestKit
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

    /// Parses `bytes` by RFC 5424's grammar: six header fields, STRUCTURED-DATA (NILVALUE or
    /// elements whose parameters are closed and escaped), then nothing or SP MSG. Returns the
    /// elements (name, parameters) and the MSG, or nil when the grammar is broken.
    func parse(_ bytes: [UInt8]) -> (elements: [(String, [(String, String)])], msg: [UInt8])? {
        var i = 0, spaces = 0
        while i < bytes.count && spaces < 6 {
            if bytes[i] == 0x20 { spaces += 1 }
            i += 1
        }
        guard spaces == 6, i < bytes.count else { return nil }
        var elements: [(String, [(String, String)])] = []
        if bytes[i] == UInt8(ascii: "-") {
            i += 1
        } else {
            while i < bytes.count && bytes[i] == UInt8(ascii: "[") {
                i += 1
                var name: [UInt8] = []
                while i < bytes.count && bytes[i] != 0x20 && bytes[i] != UInt8(ascii: "]") { name.append(bytes[i]); i += 1 }
                var params: [(String, String)] = []
                while i < bytes.count && bytes[i] == 0x20 {
                    i += 1
                    var key: [UInt8] = []
                    while i < bytes.count && bytes[i] != UInt8(ascii: "=") { key.append(bytes[i]); i += 1 }
                    guard i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "\"") else { return nil }
                    i += 2
                    var value: [UInt8] = []
                    while true {
                        guard i < bytes.count else { return nil }  // a value never closed
                        if bytes[i] == UInt8(ascii: "\\") {
                            guard i + 1 < bytes.count else { return nil }
                            value.append(bytes[i + 1])
                            i += 2
                            continue
                        }
                        if bytes[i] == UInt8(ascii: "\"") { i += 1; break }
                        guard bytes[i] != UInt8(ascii: "]") else { return nil }  // an unescaped ']' in a value
                        value.append(bytes[i])
                        i += 1
                    }
                    params.append((String(decoding: key, as: UTF8.self), String(decoding: value, as: UTF8.self)))
                }
                guard i < bytes.count, bytes[i] == UInt8(ascii: "]") else { return nil }  // an element never closed
                i += 1
                elements.append((String(decoding: name, as: UTF8.self), params))
            }
            guard !elements.isEmpty else { return nil }
        }
        if i == bytes.count { return (elements, []) }
        guard bytes[i] == 0x20 else { return nil }
        return (elements, Array(bytes[(i + 1)...]))
    }

    /// F2 of the outside test: structured data longer than the limit was cut inside a value, with no
    /// closing '"' or ']', and rsyslog stored it broken with an empty MSG. Now whole parameters are
    /// kept while they fit, the first that does not is cut inside its value, every element closes,
    /// and the MSG is there, cut, with its marker.
    func testStructuredDataLongerThanTheLimitStaysWellFormed() throws {
        let huge = String(repeating: "v\"]\\é", count: 3000)
        let entry = try entry { log in
            log.warning("request \(7) failed", metadata: ["a": "small", "huge": "\(huge)", "z": "after"])
        }
        for limit in [480, 600, 1000, 8096] {
            let format = SyslogFormat(hostname: "h", appName: "a", maximumBytes: limit)
            let (bytes, truncated) = format.message(for: entry)
            XCTAssertTrue(truncated)
            XCTAssertLessThanOrEqual(bytes.count, limit)
            XCTAssertNotNil(String(validating: bytes, as: UTF8.self), "valid UTF-8 at \(limit)")
            let parsed = try XCTUnwrap(parse(bytes), "well-formed at \(limit): \(String(decoding: bytes, as: UTF8.self).suffix(120))")
            XCTAssertEqual(parsed.elements.first?.0, "logbook@32473")
            XCTAssertTrue(parsed.msg.starts(with: [0xEF, 0xBB, 0xBF]), "a cut MSG carries the BOM (its marker is UTF-8)")
            XCTAssertTrue(String(decoding: parsed.msg, as: UTF8.self).hasSuffix("…[truncated]"))
            if limit == 8096 {
                let meta = try XCTUnwrap(parsed.elements.first { $0.0 == "meta@32473" })
                XCTAssertEqual(meta.1.map(\.0), ["a", "huge"], "whole, then cut")
                XCTAssertGreaterThan(meta.1[1].1.utf8.count, 4500, "as much of the value as fits (escaped, it fills the message)")
            }
            if let meta = parsed.elements.first(where: { $0.0 == "meta@32473" }) {
                XCTAssertEqual(meta.1.first?.0, "a")
                if let cut = meta.1.first(where: { $0.0 == "huge" }) {
                    XCTAssertTrue(huge.hasPrefix(String(cut.1.dropLast())) && cut.1.hasSuffix("…"), "a prefix of the value, whole characters")
                }
                XCTAssertFalse(meta.1.contains { $0.0 == "z" }, "nothing after the parameter cut")
            }
        }
    }

    /// F13: a truncated ASCII MSG gained "…" (UTF-8) but no BOM, though a non-ASCII MSG carries one.
    func testATruncatedASCIIMessageCarriesTheBOM() throws {
        let entry = try entry { log in log.info("\(String(repeating: "x", count: 5000))") }
        let format = SyslogFormat(hostname: "h", appName: "a", maximumBytes: 1000)
        let (bytes, truncated) = format.message(for: entry)
        XCTAssertTrue(truncated)
        let parsed = try XCTUnwrap(parse(bytes))
        XCTAssertTrue(parsed.msg.starts(with: [0xEF, 0xBB, 0xBF] + Array("xxx".utf8)), "BOM, then the message")
        XCTAssertTrue(String(decoding: parsed.msg, as: UTF8.self).hasSuffix("x…[truncated]"))
        // An ASCII MSG that fits stays without a BOM.
        let short = try self.entry { log in log.info("plain \(1)") }
        XCTAssertEqual(try XCTUnwrap(parse(format.message(for: short).bytes)).msg, Array("plain 1".utf8))
    }

    /// Any time a record can carry (a damaged one too: Int64.min, Int64.max, before 1970) is written
    /// by the one RFC 3339 formatter: the syslog TIMESTAMP is `show`'s, cut to microseconds, and no
    /// time traps (Int64.min did in the syslog formatter).
    func testEveryTimeIsWrittenByTheOneFormatter() throws {
        var entry = try entry { $0.info("any time") }
        let format = SyslogFormat(hostname: "h", appName: "a")
        for nanoseconds: Int64 in [.min, .min + 1, -1_000_000_001, -1, 0, 1, 1_764_000_000_123_456_789, .max - 1, .max] {
            entry.wallNanoseconds = nanoseconds
            let full = formatRFC3339(nanoseconds: nanoseconds)
            XCTAssertEqual(full.utf8.count, 30, full)
            let text = String(decoding: format.message(for: entry).bytes, as: UTF8.self)
            let stamp = text.split(separator: " ")[1]
            XCTAssertEqual(String(stamp), String(full.prefix(26)) + "Z", "\(nanoseconds)")
            XCTAssertTrue(entry.textLine().hasPrefix(full), "\(nanoseconds): \(entry.textLine())")
            XCTAssertTrue(entry.jsonLine().contains("\"time\":\"\(full)\""), "\(nanoseconds): \(entry.jsonLine())")
        }
        XCTAssertEqual(formatRFC3339(nanoseconds: .min), "1677-09-21T00:12:43.145224192Z")
        XCTAssertEqual(formatRFC3339(nanoseconds: -1), "1969-12-31T23:59:59.999999999Z")
        XCTAssertEqual(formatRFC3339(nanoseconds: .max), "2262-04-11T23:47:16.854775807Z")
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
