import LogbookTestKit
import XCTest
@testable import Logbook

final class FormattingTests: XCTestCase {
    func testRFC3339RoundTripsAcrossTheRange() {
        for nanoseconds: Int64 in [0, 1, 999_999_999, 1_795_000_000_123_456_789, -1, -86_400_000_000_001,
                                   951_782_400_000_000_000 /* 2000-02-29 */, 9_000_000_000_000_000_000] {
            let text = formatRFC3339(nanoseconds: nanoseconds)
            XCTAssertEqual(parseRFC3339(text), nanoseconds, text)
        }
        XCTAssertEqual(formatRFC3339(nanoseconds: 0), "1970-01-01T00:00:00.000000000Z")
        XCTAssertEqual(formatRFC3339(nanoseconds: 951_782_400_000_000_000), "2000-02-29T00:00:00.000000000Z")
        XCTAssertEqual(parseRFC3339("2026-11-21T10:00:00+02:00"), parseRFC3339("2026-11-21T08:00:00Z"))
        XCTAssertNil(parseRFC3339("2026-11-24T09:00:00+99:00"), "an offset's hours are below 24")
        XCTAssertNil(parseRFC3339("2026-11-24T09:00:00+01:60"), "an offset's minutes are below 60")
        XCTAssertEqual(parseRFC3339("2026-11-21T08:00:00.5Z"), parseRFC3339("2026-11-21T08:00:00Z")! + 500_000_000)
        for bad in ["", "2026-11-21", "2026-13-01T00:00:00Z", "2026-11-21T08:00:00", "2026-11-21T08:00:00.Z",
                    "2026-11-21T08:00:00Zjunk", "9999-01-01T00:00:00Z", "１９７０-01-01T00:00:00Z"] {
            XCTAssertNil(parseRFC3339(bad), bad)
        }
    }

    func testTemplateRendering() {
        XCTAssertEqual(renderTemplate("a {} b {} c", ["1", "2"]), "a 1 b 2 c")
        XCTAssertEqual(renderTemplate("{{}} {}", ["x"]), "{}} x")
        XCTAssertEqual(renderTemplate("missing {} {}", ["1"]), "missing 1 {}")
        XCTAssertEqual(renderTemplate("extra", ["1", "2"]), "extra 1 2")
        XCTAssertEqual(renderTemplate("trailing {", []), "trailing {")
        XCTAssertEqual(renderTemplate("odd {x}", []), "odd {x}")
    }

    func testEscaping() {
        XCTAssertEqual(escapingControlCharacters("plain ünïcode"), "plain ünïcode")
        XCTAssertEqual(escapingControlCharacters("a\nb\u{1b}[0m\u{7f}\u{9b}"), #"a\nb\u{1b}[0m\u{7f}\u{9b}"#)
        XCTAssertEqual(escapingJSON("q\"b\\n\n\u{1}\u{2028}"), #"q\"b\\n\n\u0001\u2028"#)
    }

    func testJSONValues() {
        XCTAssertEqual(LogValue.double(.nan).jsonValue, "\"nan\"")
        XCTAssertEqual(LogValue.float(-.infinity).jsonValue, "\"-inf\"")
        XCTAssertEqual(LogValue.double(0.1).jsonValue, "0.1")
        XCTAssertEqual(LogValue.bytes([0, 255]).jsonValue, "\"00ff\"")
        XCTAssertEqual(LogValue.redacted(.string).jsonValue, "null")
        XCTAssertEqual(LogValue.unsigned(.max, .uint64).jsonValue, "18446744073709551615")
    }
}
