import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
@testable import LogbookUpload

/// `logbook upload` and SIGTERM or SIGINT: it stops at once, whatever its parent did with the
/// signal, says what it leaves, and its spool keeps every item with its state for the next run.
final class UploadCommandSignalTests: XCTestCase {
    /// A SIGTERM while an item waits for a server's Retry-After of an hour: the command ended by
    /// the signal's default action, mid-wait, without a word of what it left. Now it stops, says
    /// that the item stays in the spool, and ends by SIGTERM; the item's state (its attempt, the
    /// 503, the hour's wait) is in the spool.
    func testSIGTERMStopsAWaitingUploadAndSaysWhatStaysInTheSpool() throws {
        try stopsOnSignal(SIGTERM, ignoredByItsParent: false)
    }

    /// A signal its parent ignored (a script's `logbook upload … &` ignores SIGINT, `trap '' TERM`
    /// before `exec` SIGTERM) was inherited as ignored: `logbook upload` waited through it for the
    /// hour. Its own handler now replaces what it inherited.
    func testASignalItsParentIgnoredStillStopsIt() throws {
        try stopsOnSignal(SIGINT, ignoredByItsParent: true)
        try stopsOnSignal(SIGTERM, ignoredByItsParent: true)
    }

    private func stopsOnSignal(_ signalNumber: Int32, ignoredByItsParent: Bool, file: StaticString = #filePath, line: UInt = #line) throws {
        guard let logbook = logbookExecutable() else { throw XCTSkip("the logbook executable is not built") }
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let report = dir + "/report.txt", spool = dir + "/spool"
        try Data("report".utf8).write(to: URL(fileURLWithPath: report))
        let id = try Spool.contentIdentifier(ofFile: report)
        let arguments = ["upload", "--spool", spool, "--to", server.url("/fail/100/503/3600").absoluteString, report]
        let child = ignoredByItsParent
            ? try ChildProcess("/bin/sh", ["-c", "trap '' INT TERM; exec \"$0\" \"$@\"", logbook] + arguments)
            : try ChildProcess(logbook, arguments)
        defer { child.killIfRunning() }
        // The first attempt's 503 is in the spool: the run now waits an hour for the next one.
        try waitUntil("the first attempt recorded", child) { Self.state(of: id, in: spool)?.attempts == 1 }
        XCTAssertEqual(kill(child.process.processIdentifier, signalNumber), 0)
        let status = try child.waitForExit()
        let said = child.output + child.errors
        XCTAssertEqual(status, 128 + signalNumber, said, file: file, line: line)
        let name = signalNumber == SIGINT ? "SIGINT" : "SIGTERM"
        XCTAssertTrue(child.errors.contains("stopped by \(name): 1 item not delivered yet stays in the spool for the next run"),
                      said, file: file, line: line)
        XCTAssertTrue(child.output.contains("0 delivered (0 bytes), 0 failed, 1 attempts"), said, file: file, line: line)
        let pending = try Spool(path: spool).contents().items
        XCTAssertEqual(pending.map(\.id), [id], file: file, line: line)
        XCTAssertEqual(pending.first?.lastStatus, 503, file: file, line: line)
        XCTAssertGreaterThan(pending.first?.nextAttemptNanoseconds ?? 0, Spool.wallClock() + 3000 * 1_000_000_000,
                             "the hour's wait kept", file: file, line: line)
        XCTAssertEqual(server.requests().count, 1, file: file, line: line)
    }

    /// An item's state as its state file holds it now (replaced atomically after every attempt).
    private static func state(of id: String, in spool: String) -> SpooledItem? {
        guard let bytes = FileManager.default.contents(atPath: spool + "/" + id + ".state") else { return nil }
        return SpoolStateRecord.decode(Array(bytes), id: id, byteCount: 0)
    }

    /// Polls `condition` (what the child wrote) until it holds; the deadline is a failsafe.
    private func waitUntil(_ what: String, _ child: ChildProcess, _ condition: () -> Bool) throws {
        let deadline = Date(timeIntervalSinceNow: 120)
        while !condition() {
            guard child.process.isRunning else { throw TestFailure("exited before \(what): \(child.output) \(child.errors)") }
            guard Date() < deadline else { throw TestFailure("not \(what) after 120 s: \(child.output) \(child.errors)") }
            usleep(5_000)
        }
    }
}
