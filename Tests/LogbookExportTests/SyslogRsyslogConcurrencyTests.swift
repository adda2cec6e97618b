import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookExport
import LogbookUpload
import LogbookTesting

/// RELP to a real rsyslog restarted while messages are in flight: every message once.
final class SyslogRsyslogConcurrencyTests: XCTestCase, SyslogRsyslogTestCase {
    /// RELP: rsyslog restarted three times while 3,000 messages are in flight; every message
    /// arrives, each once (a message resent after a broken session may repeat: at most `resent`),
    /// with the fields rsyslog parsed as written.
    func testEveryMessageOnceAcrossRestartsOverRELP() throws {
        let dir = makeTemporaryDirectory(self)
        let rsyslog = try Rsyslog(directory: dir, input: .relp)
        try rsyslog.start()
        let format = SyslogFormat(facility: 16, hostname: "host1", appName: "app")
        let destination = SyslogDestination(host: "127.0.0.1", port: rsyslog.port, transport: .relp, format: format,
                                            policy: patientPolicy)
        let (entries, deliveries) = try sendAcrossRestarts(rsyslog, destination, count: 3000, restarts: 3) { entries, bodies in
            Set(bodies).isSuperset(of: entries.map(\.message))
        }
        var resent = 0
        for delivery in deliveries {
            guard case .delivered(_, _, let again) = delivery else { return XCTFail("\(delivery)") }
            resent += again
        }
        let lines = rsyslog.lines()
        let bodies = rsyslog.bodies()
        XCTAssertEqual(Set(bodies), Set(entries.map { $0.message }), "every message arrived")
        XCTAssertLessThanOrEqual(bodies.count - entries.count, resent, "repeats only among those resent")
        print("RELP across 3 restarts: \(entries.count) messages, \(bodies.count) lines, \(resent) resent")
        let first = try XCTUnwrap(lines.first)
        XCTAssertEqual(first["pri"], "132")  // local0 * 8 + warning (4)
        XCTAssertEqual(first["host"], "host1")
        XCTAssertEqual(first["app"], "app")
        XCTAssertEqual(first["msgid"], "net")
        XCTAssertEqual(first["procid"], String(entries[0].processID))
        XCTAssertTrue(first["sd"]?.contains(#"path="/a\]\"b""#) == true, first["sd"] ?? "")
    }
}
