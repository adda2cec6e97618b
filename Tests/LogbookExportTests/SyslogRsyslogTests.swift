import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookExport
import LogbookUpload
import LogbookTesting

/// Syslog to a real rsyslog: Debian's rsyslogd, started by the tests unprivileged in the foreground
/// with imrelp or imtcp on a loopback port, writing the fields it parsed as JSON lines, and
/// restarted while messages are in flight. Over RELP every message arrives, once unless counted as
/// resent; over plain TCP a restart can lose what rsyslog had not read, never repeat.
/// Those of its tests that CI also runs under ThreadSanitizer are in `SyslogRsyslogConcurrencyTests`.
final class SyslogRsyslogTests: XCTestCase, SyslogRsyslogTestCase {
    /// Plain TCP: the same restarts lose at most what rsyslog had received but not read, and repeat
    /// only what was written again after a connection was found closed (`resent`: rsyslog may have
    /// read a batch just before it closed; a test that expected no repeat at all failed when the
    /// restart's timing put a batch in that window); what is sent after a restart arrives.
    func testRestartsOverTCPRepeatOnlyWhatWasResent() throws {
        let dir = makeTemporaryDirectory(self)
        let rsyslog = try Rsyslog(directory: dir, input: .tcp)
        try rsyslog.start()
        let destination = SyslogDestination(host: "127.0.0.1", port: rsyslog.port, transport: .tcp, format: SyslogFormat(appName: "app"),
                                            policy: patientPolicy)
        let (entries, deliveries) = try sendAcrossRestarts(rsyslog, destination, count: 3000, restarts: 3) { entries, bodies in
            bodies.contains(entries.last!.message)
        }
        var resent = 0
        for delivery in deliveries {
            guard case .delivered(_, _, let again) = delivery else { return XCTFail("\(delivery)") }
            resent += again
        }
        let bodies = rsyslog.bodies()
        XCTAssertLessThanOrEqual(bodies.count - Set(bodies).count, resent, "repeats only among those resent")
        XCTAssertTrue(Set(bodies).isSubset(of: Set(entries.map { $0.message })))
        XCTAssertEqual(bodies.last, entries.last?.message, "the last batch, after the restarts, arrived")
        print("TCP across 3 restarts: \(entries.count) messages, \(bodies.count) arrived, \(resent) resent")
    }

    /// `logbook export --syslog relp://` and `tcp://` to rsyslog: every record once, its fields as
    /// rsyslog parsed them, a message past the maximum size cut with the marker and counted;
    /// nothing again on a second run.
    func testTheCommandToRsyslog() throws {
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        for transport in [SyslogDestination.Transport.relp, .tcp] {
            let dir = makeTemporaryDirectory(self)
            let rsyslog = try Rsyslog(directory: dir, input: transport)
            try rsyslog.start()
            let bundle = try LogBundle(path: dir + "/app.logbook")
            let log = try bundle.logger("web")
            for i in 0..<1000 { log.notice("request \(i) served", metadata: ["i": .init(i)]) }
            log.info("\(String(repeating: "x", count: 9000))")
            try bundle.close()
            let arguments = ["export", "--syslog", "\(transport.rawValue)://127.0.0.1:\(rsyslog.port)", "--app-name", "web-app",
                             "--cursors", dir + "/cursors", "--batch", "100", dir + "/app.logbook"]
            let first = try runProgram(logbook, arguments)
            XCTAssertEqual(first.status, 0, first.output)
            XCTAssertTrue(first.output.contains("exported 1001 records, 1 syslog messages truncated"), first.output)
            let second = try runProgram(logbook, arguments)
            XCTAssertTrue(second.output.contains("exported 0 records"), second.output)
            rsyslog.waitUntilWritten { $0.count >= 1001 }
            rsyslog.stop()
            let lines = rsyslog.lines()
            XCTAssertEqual(lines.count, 1001, "\(transport)")
            let bodies = lines.compactMap { $0["msg"] }
            XCTAssertEqual(Set(bodies.prefix(1000)).count, 1000)
            XCTAssertEqual(bodies.first, "request 0 served")
            XCTAssertEqual(lines.first?["pri"], "13")  // user (1) * 8 + notice (5)
            XCTAssertEqual(lines.first?["app"], "web-app")
            XCTAssertEqual(lines.first?["msgid"], "web")
            XCTAssertTrue(lines.first?["sd"]?.contains(#"[meta@32473 i="0"]"#) == true, lines.first?["sd"] ?? "")
            XCTAssertTrue(bodies.last?.hasSuffix("x…[truncated]") == true, String(bodies.last?.suffix(30) ?? ""))
        }
    }

    /// A RELP address that is a plain TCP syslog server: refused after one open (5 s) with a
    /// reason, and nothing skipped: the cursor does not move.
    func testRELPToAPlainTCPServerStopsWithAReasonAndSkipsNothing() throws {
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let rsyslog = try Rsyslog(directory: dir, input: .tcp)
        try rsyslog.start()
        let bundle = try LogBundle(path: dir + "/app.logbook")
        try bundle.logger("web").info("one")
        try bundle.close()
        let run = try runProgram(logbook, ["export", "--syslog", "relp://127.0.0.1:\(rsyslog.port)", "--cursors", dir + "/cursors",
                                           dir + "/app.logbook"])
        XCTAssertEqual(run.status, 1, run.output)
        XCTAssertTrue(run.output.contains("is it a RELP server"), run.output)
        // nothing was skipped: the right address exports the record
        let relp = try Rsyslog(directory: makeTemporaryDirectory(self), input: .relp)
        try relp.start()
        let right = try runProgram(logbook, ["export", "--syslog", "relp://127.0.0.1:\(relp.port)", "--cursors", dir + "/cursors",
                                             dir + "/app.logbook"])
        XCTAssertTrue(right.output.contains("exported 1 records"), right.output)
    }
}
