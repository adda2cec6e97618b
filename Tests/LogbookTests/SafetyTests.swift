import Foundation
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

/// Errors a user can act on: they name the option and its range, the directory that failed, and
/// say "the bundle is closed" for every call after close.
final class ErrorMessageTests: XCTestCase {
    func testInvalidOptionsNameTheOptionTheValueAndTheRange() {
        let path = makeTemporaryDirectory(self) + "/options.logbook"
        func message(_ open: () throws -> Void) -> String {
            do { try open() } catch { return "\(error)" }
            return "no error"
        }
        XCTAssertTrue(message { _ = try LogBundle(path: path, chunkSize: 1000) }
            .contains("chunk size 1000 is not a power of two from 4096 to 16777216 bytes"))
        XCTAssertTrue(message { _ = try LogBundle(path: path, capacity: 0) }
            .contains("capacity 0 bytes holds 0 chunks of 65536 bytes; a ring needs 2 to"))
        XCTAssertTrue(message { _ = try LogBundle(path: path, archive: ArchiveOptions(maxFileSize: 1)) }
            .contains("max file size 1 bytes is under the minimum of 65536 bytes"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "nothing is created for bad options")
    }

    /// Regression (outside adversarial test): negative or too large values were clamped before the
    /// check, so the error named a value the caller never gave, or none was raised at all.
    func testValuesTheOptionsCannotHoldAreRefusedAsGiven() {
        let path = makeTemporaryDirectory(self) + "/range.logbook"
        let cases: [(String, () throws -> Void)] = [
            ("capacity -1 bytes is negative", { _ = try LogBundle(path: path, capacity: -1) }),
            ("chunk size -65536 is not a power of two", { _ = try LogBundle(path: path, chunkSize: -65536) }),
            ("chunk size 4295032832 is not a power of two", { _ = try LogBundle(path: path, chunkSize: (1 << 32) + 65536) }),
            ("idle seal -1 ms is out of range", { _ = try LogBundle(path: path, idleSealMilliseconds: -1) }),
            ("lossless wait -1 ms is out of range", { _ = try LogBundle(path: path, losslessWaitMilliseconds: -1) }),
            ("max file size -1 bytes is under the minimum", { _ = try LogBundle(path: path, archive: ArchiveOptions(maxFileSize: -1)) }),
            ("quota -1 bytes is negative", { _ = try LogBundle(path: path, archive: ArchiveOptions(quota: -1)) }),
            ("max files -1 is out of range", { _ = try LogBundle(path: path, archive: ArchiveOptions(maxFiles: -1)) }),
            ("max files 0 is out of range", { _ = try LogBundle(path: path, archive: ArchiveOptions(maxFiles: 0)) }),
            ("max files 4294967296 is out of range", { _ = try LogBundle(path: path, archive: ArchiveOptions(maxFiles: 1 << 32)) }),
            ("roll interval -5.0 seconds is negative", { _ = try LogBundle(path: path, archive: ArchiveOptions(rollInterval: .seconds(-5))) }),
        ]
        for (expected, open) in cases {
            XCTAssertThrowsError(try open(), expected) { error in
                XCTAssertEqual((error as? LogbookError)?.errno, EINVAL, expected)
                XCTAssertTrue("\(error)".contains(expected), "\(error) lacks \(expected)")
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "nothing is created for bad options")
    }

    /// Regression (outside adversarial test): a closed bundle's logger, logging at a new call site,
    /// appended a site entry to meta at its old end, over the entries of the writer that opened the
    /// bundle next: every record of that writer lost its call site.
    func testLoggingAfterCloseNeverTouchesTheNextWritersFiles() throws {
        let path = makeTemporaryDirectory(self) + "/late.logbook"
        let old = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let oldLog = try old.logger("old")
        oldLog.info("before close \(1)")
        try old.close()
        let next = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let nextLog = try next.logger("next")
        for i in 0..<100 { nextLog.info("next writer \(i)") }
        oldLog.warning("a new call site after close \(2)")
        oldLog.error("another \(3)")
        try next.close()
        let (entries, issues) = try readBundle(path)
        XCTAssertEqual(issues.map(\.description), [])
        XCTAssertEqual(entries.count, 101)
        XCTAssertEqual(entries.filter { $0.message.hasPrefix("next writer") }.count, 100)
        XCTAssertGreaterThanOrEqual(old.counters.drops[.closed] ?? 0, 2)
    }

    /// Regression: the second writer of an archived bundle got "Resource temporarily unavailable".
    func testSecondWriterGetsOneMessageWithOrWithoutAnArchiver() throws {
        let path = makeTemporaryDirectory(self) + "/locked.logbook"
        let first = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        for archive in [nil, ArchiveOptions()] {
            XCTAssertThrowsError(try LogBundle(path: path, archive: archive)) { error in
                let error = error as! LogbookError
                XCTAssertTrue(error.isLockedByAnotherWriter)
                XCTAssertTrue("\(error)".contains(": another process is writing to this bundle (errno"), "\(error)")
            }
        }
        try first.close()
    }

    /// Regression: a failing archive directory was reported under the bundle's path only.
    func testFailingArchiveDirectoryIsNamed() throws {
        let dir = makeTemporaryDirectory(self)
        let notADirectory = dir + "/plain-file"
        _ = FileManager.default.createFile(atPath: notADirectory, contents: Data("x".utf8))
        XCTAssertThrowsError(try LogBundle(path: dir + "/a.logbook", archive: ArchiveOptions(directory: notADirectory))) { error in
            XCTAssertTrue("\(error)".contains("archive directory '\(notADirectory)' is not a directory"), "\(error)")
        }
        let shared = dir + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        chmod(shared, 0o777)
        XCTAssertThrowsError(try LogBundle(path: dir + "/b.logbook", archive: ArchiveOptions(directory: shared))) { error in
            XCTAssertEqual((error as! LogbookError).errno, EPERM)
            XCTAssertTrue("\(error)".contains("archive directory '\(shared)' is writable by every user (mode 0777)"), "\(error)")
        }
        XCTAssertThrowsError(try LogBundle(path: shared)) { error in
            XCTAssertTrue("\(error)".contains("bundle directory '\(shared)' is writable by every user"), "\(error)")
        }
    }

    /// Regression: flush() after close() said "Bad file descriptor"; close() twice and logger()
    /// after close said nothing.
    func testEveryCallAfterCloseSaysTheBundleIsClosed() throws {
        let bundle = try LogBundle(path: makeTemporaryDirectory(self) + "/closed.logbook", capacity: 1 << 20,
                                   chunkSize: 16 << 10, archive: ArchiveOptions())
        _ = try bundle.logger("before")
        try bundle.close()
        let calls: [(String, () throws -> Void)] = [
            ("close", { try bundle.close() }),
            ("flush", { try bundle.flush() }),
            ("logger", { _ = try bundle.logger("after") }),
            ("logger of an earlier name", { _ = try bundle.logger("before") }),
            ("rollArchive", { try bundle.rollArchive() }),
            ("syncArchive", { try bundle.syncArchive() }),
        ]
        for (name, call) in calls {
            XCTAssertThrowsError(try call(), name) { error in
                let error = error as! LogbookError
                XCTAssertTrue(error.isClosed, "\(name): \(error)")
                XCTAssertTrue("\(error)".contains(": the bundle is closed (errno"), "\(name): \(error)")
            }
        }
    }
}

/// The test kit from many threads, and when it is too small (outside adversarial test findings).
final class CaptureSafetyTests: XCTestCase {
    /// Regression: `LogCapture` is `Sendable`, but reading it from two threads at once crashed
    /// (one `LogReader` shared without a lock); swift-testing runs tests in parallel.
    func testCaptureIsReadFromManyThreadsAtOnce() throws {
        let capture = try LogCapture()
        let log = try capture.logger("x")
        for i in 0..<1000 { log.info("e \(i)") }
        let counts = Locked([Int]())
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for round in 0..<100 {
                if round % 2 == 0 {
                    let count = (try? capture.entries().count) ?? -1
                    counts.withLock { $0.append(count) }
                } else {
                    _ = try? capture.expect(message: "e 5")
                }
                if thread == 0 { log.info("more \(round)") }
            }
        }
        XCTAssertFalse(counts.withLock { $0 }.contains { $0 < 1000 }, "every read sees at least what was logged before")
        XCTAssertEqual(try capture.entries().count, 1100)
    }

    /// A capture too small for what a test logs says so when an expectation fails, instead of
    /// listing the survivors as if they were everything.
    func testFailedExpectationSaysHowManyEntriesTheRingOverwrote() throws {
        let capture = try LogCapture(capacity: 1 << 16)
        let log = try capture.logger("x")
        for i in 0..<10_000 { log.info("entry \(i) of a capture too small for all of them") }
        XCTAssertThrowsError(try capture.expect(message: "entry 0 of a capture too small for all of them")) { error in
            let failure = error as! LogExpectationFailure
            XCTAssertGreaterThan(failure.overwritten, 0)
            XCTAssertEqual(UInt64(failure.captured.count) + failure.overwritten, 10_000)
            XCTAssertTrue("\(failure)".contains("older ones the ring overwrote: give LogCapture a larger capacity"), "\(failure)")
        }
    }
}
