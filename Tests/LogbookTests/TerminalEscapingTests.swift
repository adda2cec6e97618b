import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
import LogbookTesting

/// What a terminal receives from `logbook` (every output escaped by the one escaper), and errors
/// that say what was wrong. The hostile-path, FIFO and fork cases of the C core are in
/// Tests/CTests/safety_test.c (CProgramTests.testSafetyProgramPasses).
final class TerminalEscapingTests: XCTestCase {
    var logbook: String!

    override func setUpWithError() throws {
        guard let found = logbookExecutable() else { return XCTFail("`swift test` builds the logbook executable") }
        logbook = found
    }

    /// Regression: bidi controls (U+202E, U+2066–U+2069) and other invisible format characters
    /// were printed raw by `show`, so a line could read differently from what was logged.
    func testShowEscapesBidiControlsAndInvisibleFormatCharacters() throws {
        let path = makeTemporaryDirectory(self) + "/bidi.logbook"
        let hostile = "invoice\u{202E}fdp.exe \u{2066}a\u{2067}b\u{2068}c\u{2069} zero\u{200B}width bom\u{FEFF} soft\u{AD}hyphen tag\u{E0041}"
        let harmless = "café 東京 🙂 naïve ∑ “quoted” — dash"
        do {
            let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
            let log = try bundle.logger("bidi\u{202E}name")
            log.info("text \(hostile)")
            log.info("text \(harmless)")
            log.info("literal \u{202E}in the template")
            try bundle.close()
        }
        let text = try runProgram(logbook, ["show", path])
        XCTAssertEqual(text.status, 0, text.output)
        for scalar in ["\u{202E}", "\u{2066}", "\u{2067}", "\u{2068}", "\u{2069}", "\u{200B}", "\u{FEFF}", "\u{AD}", "\u{E0041}"] {
            XCTAssertFalse(text.output.contains(scalar), "U+\(String(scalar.unicodeScalars.first!.value, radix: 16)) reached the terminal")
        }
        XCTAssertTrue(text.output.contains(#"invoice\u{202e}fdp.exe \u{2066}a\u{2067}b\u{2068}c\u{2069} zero\u{200b}width"#), text.output)
        XCTAssertTrue(text.output.contains(#"bidi\u{202e}name: "#), text.output)
        XCTAssertTrue(text.output.contains(#"literal \u{202e}in the template"#), text.output)
        XCTAssertTrue(text.output.contains("text " + harmless), "harmless non-ASCII text is kept as it is: \(text.output)")

        let json = try runProgram(logbook, ["show", "--json", path])
        XCTAssertEqual(json.status, 0, json.output)
        XCTAssertFalse(json.output.contains("\u{202E}"))
        XCTAssertTrue(json.output.contains(#"\u202e"#), json.output)
        XCTAssertTrue(json.output.contains(#"\udb40\udc41"#), "a tag character past the BMP is a surrogate pair: \(json.output)")
        let messages = try json.output.split(separator: "\n").map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            return object["message"] as! String
        }
        XCTAssertEqual(messages, ["text " + hostile, "text " + harmless, "literal \u{202E}in the template"],
                       "JSON escapes, it never alters")
    }

    /// Regression: `logbook info` printed a session's executable path raw: an executable named with
    /// an OSC sequence set the terminal's title.
    func testInfoEscapesTheExecutableAndEveryOtherLine() throws {
        let dir = makeTemporaryDirectory(self)
        let demo = URL(fileURLWithPath: logbook).deletingLastPathComponent().appendingPathComponent("logbook-demo").path
        guard FileManager.default.isExecutableFile(atPath: demo) else {
            return XCTFail("`swift test` builds logbook-demo; not found at \(demo)")
        }
        let hostileName = dir + "/demo\u{1b}]0;pwned\u{07}\u{202E}"
        try FileManager.default.copyItem(atPath: demo, toPath: hostileName)
        let bundle = dir + "/osc.logbook"
        _ = try runProgram(hostileName, [bundle])  // logs for a second, then SIGKILLs itself
        let info = try runProgram(logbook, ["info", bundle])
        XCTAssertEqual(info.status, 0, info.output)
        XCTAssertFalse(info.output.contains("\u{1b}") || info.output.contains("\u{07}") || info.output.contains("\u{202E}"),
                       "a control character reached the terminal: \(info.output.debugDescription)")
        XCTAssertTrue(info.output.contains(#"demo\u{1b}]0;pwned\u{7}\u{202e}"#), info.output)

        let verify = try runProgram(logbook, ["verify", bundle])
        XCTAssertFalse(verify.output.contains("\u{1b}"), verify.output)
    }

    /// Error text names a path the user typed (or a file someone planted): escaped too.
    func testErrorsAndIssuesAreEscaped() throws {
        let dir = makeTemporaryDirectory(self)
        let missing = dir + "/no\u{1b}]0;pwned\u{07}such.logbook"
        for command in [["show", missing], ["verify", missing], ["info", missing], ["show", "--since", "\u{1b}[2J", dir]] {
            let result = try runProgram(logbook, command)
            XCTAssertNotEqual(result.status, 0, "\(command)")
            XCTAssertFalse(result.output.contains("\u{1b}") || result.output.contains("\u{07}"),
                           "\(command): \(result.output.debugDescription)")
            XCTAssertTrue(result.output.contains(#"\u{1b}"#), "\(command): \(result.output)")
        }

        // A bundle whose path holds an escape: every issue line of verify is escaped.
        let bundle = dir + "/b\u{1b}[31mred.logbook"
        do {
            let written = try LogBundle(path: bundle, capacity: 64 << 10, chunkSize: 4096)
            let log = try written.logger("x")
            for i in 0..<2000 { log.info("record \(i)") }
            try written.close()
        }
        try FileManager.default.removeItem(atPath: bundle + "/meta")
        let verify = try runProgram(logbook, ["verify", bundle])
        XCTAssertEqual(verify.status, 1, verify.output)
        XCTAssertFalse(verify.output.contains("\u{1b}"), verify.output.debugDescription)
    }

    func testEscapersKeepWhatIsHarmlessAndEscapeEveryFormatCharacter() {
        XCTAssertEqual(escapingControlCharacters("plain ASCII"), "plain ASCII")
        XCTAssertEqual(escapingControlCharacters("é東🙂"), "é東🙂")
        XCTAssertEqual(escapingControlCharacters("a\u{85}b\u{9B}c\u{7F}"), #"a\u{85}b\u{9b}c\u{7f}"#)
        XCTAssertEqual(escapingControlCharacters("\u{061C}\u{180E}\u{2060}\u{206F}\u{FFF9}"),
                       #"\u{61c}\u{180e}\u{2060}\u{206f}\u{fff9}"#)
        XCTAssertEqual(escapingJSON("\u{202E}\u{9B}\"\\"), #"\u202e\u009b\"\\"#)
        // The byte masks say what the rules say.
        for byte in UInt8.min...UInt8.max {
            let ascii = byte >= 0x20 && byte < 0x7F
            XCTAssertEqual(Escaping.terminal.isClean(byte), ascii || (byte >= 0x80 && !Escaping.isUnsafeLead(byte)), "\(byte)")
            XCTAssertEqual(Escaping.json.isClean(byte), Escaping.terminal.isClean(byte) && byte != 0x22 && byte != 0x5C, "\(byte)")
        }
        // Exactly the controls, the separators and the format characters (Cf) of every plane are
        // escaped: the fast ranges of isUnsafeForTerminal agree with Unicode's properties.
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let expected = scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format
                || value == 0x2028 || value == 0x2029
            if isUnsafeForTerminal(scalar) != expected {
                XCTFail("U+\(String(value, radix: 16)): \(isUnsafeForTerminal(scalar)) for \(scalar.properties.generalCategory)")
            }
            // The byte fast path never lets one through: its lead byte sends the text to the slow path.
            if expected, let lead = String(scalar).utf8.first, Escaping.terminal.isClean(lead) || Escaping.json.isClean(lead) {
                XCTFail("U+\(String(value, radix: 16)) passes the byte fast path (lead byte \(String(lead, radix: 16)))")
            }
        }
    }
}
