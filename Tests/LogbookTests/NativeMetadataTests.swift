import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
import LogbookTesting

/// Metadata and errors from the native API (`log.info("…", metadata: [...], error: e)`).
/// Those of its tests that CI also runs under ThreadSanitizer are in `NativeMetadataConcurrencyTests`.
final class NativeMetadataTests: XCTestCase {
    struct FetchError: Error, CustomStringConvertible {
        var code: Int
        var description: String { "fetch failed with \(code)" }
    }

    /// Request-scoped metadata: a copy of the logger carries it and writes it with every record
    /// (the plain path, the first record of a site, calls with their own metadata and an error,
    /// the call's value winning for a key in both); the original logger writes none.
    func testLoggerMetadataIsWrittenWithEveryRecordOfItsCopy() throws {
        let capture = try LogCapture()
        let log = try capture.logger("api")
        let requestID = "7f3a-\(Int.random(in: 0..<1000))"
        var request = log.with(metadata: ["request_id": "\(requestID)", "user": "alice"])
        request[metadataKey: "attempt"] = 1
        request.info("started \(1)")
        for i in 0..<3 { request.info("step \(i)") }  // one site, its first record and later ones
        request.warning("slow", metadata: ["user": "bob", "ms": 250])
        request.error("failed", error: FetchError(code: 503))
        log.info("no request")
        request[metadataKey: "attempt"] = nil
        request.notice("after")

        let entries = try capture.entries()
        XCTAssertEqual(entries.map(\.message), ["started 1", "step 0", "step 1", "step 2", "slow", "failed", "no request", "after"])
        for entry in entries where entry.message != "no request" {
            XCTAssertEqual(entry.metadata["request_id"]?.string, requestID, entry.message)
        }
        XCTAssertEqual(entries[0].metadata["user"]?.string, "alice")
        XCTAssertEqual(entries[0].metadata["attempt"], .value(.signed(1, .int)))
        XCTAssertEqual(entries[4].metadata["user"]?.string, "bob", "the call's value wins")
        XCTAssertEqual(entries[4].metadata["ms"], .value(.signed(250, .int)))
        XCTAssertEqual(entries[5].error, LoggedError(FetchError(code: 503)))
        XCTAssertTrue(entries[6].metadata.isEmpty, "the original logger is unchanged")
        XCTAssertNil(entries[7].metadata["attempt"], "a key set to nil is gone")
        XCTAssertEqual(entries[7].metadata.count, 2)
    }

    func testCallRecordsTypedMetadataAndError() throws {
        let capture = try LogCapture()
        let log = try capture.logger("net.http")
        let item = "items"
        let line = #line + 1
        log.warning("request \(42) failed", metadata: [
            "status": 503, "latency": 1.25, "cached": false, "path": "/v1/\(item)", "tags": ["a", 2],
            "peer": ["host": "10.0.0.1", "port": .init(UInt16(8080))], "id": .init(UInt64.max),
        ], error: FetchError(code: 503))

        let entry = try capture.expect(.warning, logger: "net.http", message: "request 42 failed")
        XCTAssertEqual(entry.arguments, [.signed(42, .int)])
        XCTAssertEqual(entry.metadata["status"], .value(.signed(503, .int)))
        XCTAssertEqual(entry.metadata["latency"], .value(.double(1.25)))
        XCTAssertEqual(entry.metadata["cached"], .value(.bool(false)))
        XCTAssertEqual(entry.metadata["path"]?.string, "/v1/items")
        XCTAssertEqual(entry.metadata["tags"], .list([.value(.string("a", isStatic: false)), .value(.signed(2, .int))]))
        XCTAssertEqual(entry.metadata["peer"], .map(["host": "10.0.0.1", "port": .value(.unsigned(8080, .uint16))]))
        XCTAssertEqual(entry.metadata["id"], .value(.unsigned(UInt64.max, .uint64)))
        XCTAssertEqual(entry.error, LoggedError(type: "LogbookTests.NativeMetadataTests.FetchError", description: "fetch failed with 503"))
        XCTAssertEqual(entry.error, LoggedError(FetchError(code: 503)))
        XCTAssertEqual(entry.line, UInt32(line))
        XCTAssertTrue(
            entry.textLine().hasSuffix(
                "warning  net.http: request 42 failed cached=false id=18446744073709551615 latency=1.25 "
                    + "path=/v1/items peer={host=10.0.0.1, port=8080} status=503 tags=[a, 2] "
                    + "error=LogbookTests.NativeMetadataTests.FetchError: fetch failed with 503"), entry.textLine())
        let json = try JSONSerialization.jsonObject(with: Data(entry.jsonLine().utf8)) as! [String: Any]
        let metadata = try XCTUnwrap(json["metadata"] as? [String: Any])
        XCTAssertEqual(metadata["status"] as? Int, 503)
        XCTAssertEqual((metadata["peer"] as? [String: Any])?["port"] as? Int, 8080)
        XCTAssertEqual((json["error"] as? [String: Any])?["type"] as? String, "LogbookTests.NativeMetadataTests.FetchError")
        try capture.expect(metadata: ["status": "503", "peer": "{host=10.0.0.1, port=8080}"])
    }

    /// The first call at a site registers it (the slow path) and later ones take the fast path:
    /// both write the message's arguments and then the tail.
    func testFirstAndLaterCallsAtASiteRecordTheSame() throws {
        let capture = try LogCapture()
        let log = try capture.logger("jobs")
        for i in 0..<3 {
            log.info("job \(i) done", metadata: ["attempt": .init(i + 1)])
            log.error("job \(i) failed", error: FetchError(code: i))
        }
        let entries = try capture.entries(logger: "jobs")
        XCTAssertEqual(entries.map(\.message), ["job 0 done", "job 0 failed", "job 1 done", "job 1 failed", "job 2 done", "job 2 failed"])
        XCTAssertEqual(entries.compactMap { $0.metadata["attempt"]?.description }, ["1", "2", "3"])
        XCTAssertEqual(entries.compactMap { $0.error?.description }, ["fetch failed with 0", "fetch failed with 1", "fetch failed with 2"])
        XCTAssertEqual(Set(entries.map(\.line)).count, 2, "two call sites")
    }

    func testFilteredCallEvaluatesNeitherMessageNorMetadata() throws {
        let capture = try LogCapture()
        let log = try capture.logger("quiet")
        log.minimumLevel = .warning
        var evaluated = 0
        func counted(_ value: Int) -> Int {
            evaluated += 1
            return value
        }
        log.info("value \(counted(1))", metadata: ["value": .init(counted(2))])
        log.log(.debug, "value \(counted(3))", metadata: ["value": .init(counted(4))], error: FetchError(code: 1))
        XCTAssertEqual(evaluated, 0)
        log.warning("value \(counted(5))", metadata: ["value": .init(counted(6))])
        XCTAssertEqual(evaluated, 2)
        try capture.expect(.warning, message: "value 5", metadata: ["value": "6"])
        XCTAssertEqual(capture.bundle.counters.dropped, 0)
    }

    /// Every kind of value the reader decodes is written back with the same type, so a decoded
    /// entry's metadata can be logged again unchanged.
    func testEveryValueKindRoundTrips() throws {
        let capture = try LogCapture()
        let log = try capture.logger("kinds")
        let metadata: LogMetadata = [
            "bool": .value(.bool(true)), "i8": .init(Int8(-8)), "i16": .init(Int16(-16)), "i32": .init(Int32(-32)),
            "i64": .init(Int64.min), "int": .init(-1), "u8": .init(UInt8(8)), "u16": .init(UInt16(16)),
            "u32": .init(UInt32(32)), "u64": .init(UInt64(64)), "uint": .init(UInt(7)), "float": .init(Float(0.5)),
            "double": .init(-2.5), "string": "text", "static": .value(.string("constant", isStatic: true)),
            "bytes": .init(bytes: [0xde, 0xad]), "redacted": .value(.redacted(.string)), "empty list": [], "empty map": [:],
        ]
        log.notice("all kinds", metadata: metadata)
        let first = try capture.expect(message: "all kinds")
        XCTAssertEqual(first.metadata, metadata)
        log.notice("again", metadata: first.metadata)
        XCTAssertEqual(try capture.expect(message: "again").metadata, metadata)
    }

    func testRepeatedKeyKeepsTheLastValueAndDeepNestingIsStoredAsText() throws {
        let capture = try LogCapture()
        let log = try capture.logger("shapes")
        var deep: LogMetadataValue = "bottom"
        for _ in 0..<10 { deep = [deep] }
        log.info("shapes", metadata: ["key": 1, "key": 2, "deep": deep])
        let entry = try capture.expect(message: "shapes")
        XCTAssertEqual(entry.metadata.map(\.key), ["deep", "key"])
        XCTAssertEqual(entry.metadata["key"], .value(.signed(2, .int)))
        // METADATA and seven lists are containers; the eighth list down is stored as its text.
        var value = try XCTUnwrap(entry.metadata["deep"])
        for _ in 0..<7 {
            guard case .list(let items) = value, items.count == 1 else { return XCTFail("\(value)") }
            value = items[0]
        }
        XCTAssertEqual(value.string, "[[[bottom]]]")
        XCTAssertEqual(LogReader.issueCount(capture.path), 0)
    }

    /// An entry's site strings are shared by every entry of the site: setting one entry's must not
    /// change the others'.
    func testEntrySettersChangeOnlyThatEntry() throws {
        let capture = try LogCapture()
        let log = try capture.logger("edit")
        for i in 0..<2 { log.info("same site \(i)", error: FetchError(code: i)) }
        var entries = try capture.entries(logger: "edit")
        let original = entries[1]
        entries[0].file = "Other.swift"
        entries[0].source = nil
        entries[0].line = 7
        entries[0].template = "edited {}"
        entries[0].error = nil
        XCTAssertEqual(entries[0].file, "Other.swift")
        XCTAssertNil(entries[0].source)
        XCTAssertEqual(entries[0].line, 7)
        XCTAssertEqual(entries[0].message, "edited 0")
        XCTAssertNil(entries[0].error)
        XCTAssertEqual(entries[0].function, original.function)
        XCTAssertEqual(entries[1].file, "LogbookTests/NativeMetadataTests.swift")
        XCTAssertEqual(entries[1].source, "LogbookTests")
        XCTAssertEqual(entries[1].line, original.line)
        XCTAssertEqual(entries[1].message, "same site 1")
        XCTAssertEqual(entries[1].error?.description, "fetch failed with 1")
    }

    func testCategoryLoggerTakesMetadata() throws {
        enum Billing: LogCategory {}
        let capture = try LogCapture()
        LogBundle.bootstrap(capture.bundle)
        Billing.logger.notice("charged", metadata: ["cents": 1999])
        try capture.expect(.notice, logger: Billing.logCategory, message: "charged", metadata: ["cents": "1999"])
    }

    // MARK: The literal written as it is, and errors described without String(describing:)

    /// A call's literal is written without a copy: repeats anywhere in it (not only adjacent), keys
    /// that differ only in length or only in the last byte, an empty key, canonically equal keys,
    /// and literals of every size around the in-place limit (64 pairs) all read back as the same
    /// metadata built from sorted pairs.
    func testLiteralsOfEveryShapeReadBackAsTheSortedPairs() throws {
        let capture = try LogCapture()
        let log = try capture.logger("literal")
        log.info("repeats", metadata: ["b": 1, "a": 2, "b": 3, "c": 4, "a": 5, "b": 6])
        log.info("lengths", metadata: ["key": 1, "keys": 2, "ke": 3, "kez": 4, "": 5, "kez": 6])
        log.info("canonical", metadata: ["caf\u{E9}": 1, "cafe\u{301}": 2])
        log.info("long keys", metadata: [
            "a-key-longer-than-fifteen-bytes-1": "x", "a-key-longer-than-fifteen-bytes-2": "y",
            "a-key-longer-than-fifteen-bytes-1": "z",
        ])
        XCTAssertEqual(try capture.expect(message: "repeats").metadata, LogMetadata([
            .init(key: "a", value: 5), .init(key: "b", value: 6), .init(key: "c", value: 4),
        ]))
        XCTAssertEqual(try capture.expect(message: "lengths").metadata, LogMetadata([
            .init(key: "", value: 5), .init(key: "ke", value: 3), .init(key: "key", value: 1),
            .init(key: "keys", value: 2), .init(key: "kez", value: 6),
        ]))
        let canonical = try capture.expect(message: "canonical").metadata
        XCTAssertEqual(canonical.count, 1)
        XCTAssertEqual(canonical.first?.value, .value(.signed(2, .int)))
        XCTAssertEqual(try capture.expect(message: "long keys").metadata.map(\.value.string), ["z", "y"])

        // Built from pairs, set as pairs, or nested: each key once too, the last value kept (found
        // by adversarial review: these kept every pair, and the subscript found the first).
        let built = LogMetadata([.init(key: "b", value: 1), .init(key: "a", value: 1), .init(key: "a", value: 2), .init(key: "b", value: 3)])
        XCTAssertEqual(built.pairs, [.init(key: "a", value: 2), .init(key: "b", value: 3)])
        XCTAssertEqual(built["a"], .value(.signed(2, .int)))
        var set = LogMetadata()
        set.pairs = [.init(key: "z", value: 1), .init(key: "y", value: 2), .init(key: "z", value: 3)]
        XCTAssertEqual(set.pairs, [.init(key: "y", value: 2), .init(key: "z", value: 3)])
        log.info("nested", metadata: ["m": ["a": 1, "b": 2, "a": 3]])
        XCTAssertEqual(try capture.expect(message: "nested").metadata["m"], .map(LogMetadata([.init(key: "a", value: 3), .init(key: "b", value: 2)])))
        XCTAssertEqual(try capture.expect(message: "nested").metadata["m"]?.description, "{a=3, b=2}")

        for count in [0, 1, 2, 15, 16, 17, 63, 64, 65, 100] {
            // Keys in descending order, every third one repeated later with a new value.
            var elements: [(String, LogMetadataValue)] = (0..<count).reversed().map { ("k\($0)", .init($0)) }
            for index in stride(from: 0, to: count, by: 3) { elements.append(("k\(index)", .init(-index))) }
            var literal = LogMetadata()
            literal.storage = .literal(elements)  // what a literal of `count` pairs builds
            log.info("count \(count)", metadata: literal)
            let expected = LogMetadata((0..<count).map { index in
                LogMetadata.Pair(key: "k\(index)", value: .init(index % 3 == 0 ? -index : index))
            })
            XCTAssertEqual(literal, expected, "count \(count)")
            XCTAssertEqual(Array(literal), expected.pairs, "count \(count)")
            XCTAssertEqual(literal.count, count)
            let entry = try capture.expect(message: "count \(count)")
            XCTAssertEqual(entry.metadata, expected, "count \(count)")
            if count > 0 { XCTAssertEqual(entry.metadata["k0"], .value(.signed(0, .int))) }
        }
        XCTAssertEqual(LogReader.issueCount(capture.path), 0)
    }

    /// An interpolated metadata value that is one `String` is that string; with more parts, or a
    /// private part, it is what it was.
    func testInterpolatedValuesOfOneStringAndOfManyParts() throws {
        let capture = try LogCapture()
        let log = try capture.logger("interp")
        let path = "/api/v1/users/42/settings", empty = "", n = 7
        log.info("interp", metadata: [
            "whole": "\(path)", "empty": "\(empty)", "two": "\(path)\(path)", "prefixed": "p=\(path)",
            "suffixed": "\(path)!", "number": "\(n)", "mixed": "\(path) \(n)", "private": "\(path, privacy: .private)",
            "then private": "\(path)\(n, privacy: .private)",
        ])
        let metadata = try capture.expect(message: "interp").metadata
        XCTAssertEqual(metadata["whole"]?.string, path)
        XCTAssertEqual(metadata["empty"]?.string, "")
        XCTAssertEqual(metadata["two"]?.string, path + path)
        XCTAssertEqual(metadata["prefixed"]?.string, "p=" + path)
        XCTAssertEqual(metadata["suffixed"]?.string, path + "!")
        XCTAssertEqual(metadata["number"]?.string, "7")
        XCTAssertEqual(metadata["mixed"]?.string, path + " 7")
        XCTAssertEqual(metadata["private"], .value(.redacted(.string)))
        XCTAssertEqual(metadata["then private"], .value(.redacted(.string)))
    }

    /// `StringBits.equal` says what `==` says, for strings of every kind, and a small string's words
    /// hold its bytes.
    func testStringWordsAgreeWithTheStringAPI() {
        XCTAssertTrue(StringBits.isUsable)
        var built = String(repeating: "k", count: 3)
        built += "ey"
        var long = String(repeating: "a-long-key-", count: 3)
        long += "!"
        let strings = [
            "", "key", "kez", built, "kkkey", "caf\u{E9}", "cafe\u{301}", "fifteen bytes!!", "sixteen bytes!!!",
            long, "a-long-key-a-long-key-a-long-key-!", String(decoding: Array("key".utf8), as: UTF8.self),
        ]
        for a in strings {
            for b in strings { XCTAssertEqual(StringBits.equal(a, b), a == b, "\(a.debugDescription) \(b.debugDescription)") }
            if let words = StringBits.smallWords(a) {
                let bytes = withUnsafeBytes(of: words) { Array($0.prefix(StringBits.byteCount(ofSmall: words))) }
                XCTAssertEqual(bytes, Array(a.utf8))
            } else {
                XCTAssertGreaterThan(a.utf8.count, 15)
            }
        }
        XCTAssertNotNil(StringBits.immortalWords("a literal longer than fifteen bytes"))
        XCTAssertNil(StringBits.immortalWords(long))
    }
}
