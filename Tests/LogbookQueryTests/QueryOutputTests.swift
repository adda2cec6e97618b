import Foundation
import Logbook
import LogbookQuery
import LogbookTestKit
import XCTest

/// What `logbook query` prints: CSV on a terminal and to a pipe, JSON's keys and non-finite
/// numbers, SQL that begins with a comment.
final class QueryOutputTests: XCTestCase {
    func logbook() throws -> String { try XCTUnwrap(logbookExecutable(), "the logbook executable is built with the tests") }

    /// Text that would retitle a terminal, colour it, cut a C string and reverse a line, with
    /// what CSV must quote.
    static let hostile = "title \u{1b}]0;pwned\u{07} red \u{1b}[31m nul \u{0} rtl \u{202E}txet, \"quoted\"\r\nnext line"

    func hostileBundle() throws -> String {
        let path = makeTemporaryDirectory(self) + "/hostile.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 4096)
        let log = try bundle.logger("x")
        log.info("value \(Self.hostile) and \(42)")
        try bundle.close()
        return path
    }

    /// Runs `logbook` with its standard output on a pseudo-terminal (raw, so that bytes arrive as
    /// written): what a user at a terminal would get.
    func runOnTerminal(_ arguments: [String]) throws -> String {
        let script = makeTemporaryDirectory(self) + "/on_terminal.py"
        try """
        import os, pty, subprocess, sys, tty
        master, slave = pty.openpty()
        tty.setraw(slave)
        child = subprocess.Popen(sys.argv[1:], stdout=slave, stderr=subprocess.DEVNULL)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        sys.stdout.buffer.write(out)
        sys.exit(child.wait())
        """.write(toFile: script, atomically: false, encoding: .utf8)
        let result = try runProgram("/usr/bin/env", ["python3", script, try logbook()] + arguments)
        XCTAssertEqual(result.status, 0, result.output)
        return result.output
    }

    func testCSVOnATerminalIsEscapedAsTheTableAndToAPipeIsExactRFC4180() throws {
        let path = try hostileBundle()
        let sql = "SELECT arg1, arg2 FROM records"
        // On a terminal: nothing a terminal acts on arrives raw, escaped as everything else is.
        let terminal = try runOnTerminal(["query", "--csv", path, sql])
        for raw in ["\u{1b}", "\u{07}", "\u{0}", "\u{202E}", "\r"] {
            XCTAssertFalse(terminal.contains(raw), "\(raw.unicodeScalars.first!.value) reached the terminal: \(terminal.debugDescription)")
        }
        let escaped = escapingControlCharacters(Self.hostile)
        XCTAssertEqual(terminal, "arg1,arg2\n\"" + escaped.replacingOccurrences(of: "\"", with: "\"\"") + "\",42\n")
        let table = try runOnTerminal(["query", path, sql])
        XCTAssertTrue(table.contains(escaped), table.debugDescription)
        // To a pipe: the values exactly, quoted where RFC 4180 says (quote, comma, CR, LF).
        let piped = try runProgram(try logbook(), ["query", "--csv", path, sql])
        XCTAssertEqual(piped.status, 0)
        XCTAssertEqual(piped.output, "arg1,arg2\n\"" + Self.hostile.replacingOccurrences(of: "\"", with: "\"\"") + "\",42\n")
        // JSON escapes alike on both.
        let json = try runOnTerminal(["query", "--json", path, sql])
        XCTAssertFalse(json.contains("\u{1b}") || json.contains("\u{202E}"), json.debugDescription)
    }

    func testJSONKeysAreUniqueAndInfinitiesAreTheStringsShowWrites() throws {
        let path = makeTemporaryDirectory(self) + "/numbers.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 4096)
        let log = try bundle.logger("x")
        log.info("inf \(Double.infinity) minus \(-Double.infinity) float \(Float.infinity)")
        try bundle.close()
        let result = try runProgram(try logbook(), [
            "query", "--json", path,
            "SELECT 1 AS a, 2 AS a, 3 AS \"a:1\", arg1, arg2, typeof(arg1) AS t, arg3, 9e999 AS big FROM records",
        ])
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertEqual(result.output, #"{"a":1,"a:1":2,"a:1:1":3,"arg1":"inf","arg2":"-inf","t":"real","arg3":"inf","big":"inf"}"# + "\n")
        let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        XCTAssertEqual(object?.count, 8, "every column has a key of its own")
        // show --json writes the same values the same way.
        let shown = try runProgram(try logbook(), ["show", "--json", path]).output
        XCTAssertTrue(shown.contains(#""value":"inf""#) && shown.contains(#""value":"-inf""#), shown)
    }

    func testSQLThatBeginsWithACommentIsTheStatementWithoutADoubleDash() throws {
        let path = try hostileBundle()
        let comment = "-- how many\nSELECT count(*) AS n FROM records"
        for arguments in [["query", path, comment, "--json"], ["query", "--json", path, comment],
                          ["query", "--json", path, "--", comment], ["query", "--json", "--", path, comment]] {
            let result = try runProgram(try logbook(), arguments)
            XCTAssertEqual(result.status, 0, "\(arguments): \(result.output)")
            XCTAssertEqual(result.output, "{\"n\":1}\n", "\(arguments)")
        }
        // A misspelt option is said as one, not read as a source or as SQL.
        for arguments in [["query", path, "--jsn", "SELECT 1"], ["query", path, "SELECT 1", "--jsn"]] {
            let result = try runProgram(try logbook(), arguments)
            XCTAssertNotEqual(result.status, 0)
            XCTAssertTrue(result.output.contains("Unknown option '--jsn'"), result.output)
        }
    }
}
