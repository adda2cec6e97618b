import Foundation
import XCTest
import Logbook
import LogbookExport
import LogbookTesting

/// Syslog to a real rsyslog (work in progress, issue 14): Debian's rsyslogd, started by the test
/// unprivileged in the foreground with imtcp on a loopback port, writing the fields it parsed as
/// JSON lines; restarted in the middle. Every message arrives once, parsed as written.
final class SyslogRsyslogTests: XCTestCase {
    final class Rsyslog {
        let directory: String
        let port: UInt16
        var process: Process?

        init(directory: String) throws {
            guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/rsyslogd") else { throw XCTSkip("no rsyslogd (apt-get install rsyslog)") }
            self.directory = directory
            // a free port: bind to 0, read it, let it go
            let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, length) } }
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &length) } }
            port = UInt16(bigEndian: address.sin_port)
            close(s)
            let template = #"{\"pri\":\"%pri%\",\"time\":\"%timereported:::date-rfc3339%\",\"host\":\"%hostname:::json%\",\"app\":\"%app-name:::json%\",\"procid\":\"%procid:::json%\",\"msgid\":\"%msgid:::json%\",\"sd\":\"%structured-data:::json%\",\"msg\":\"%msg:::json%\"}\n"#
            let config = """
                global(workDirectory="\(directory)")
                module(load="imtcp")
                input(type="imtcp" port="\(port)" address="127.0.0.1" ruleset="out")
                template(name="fields" type="string" string="\(template)")
                ruleset(name="out") { action(type="omfile" file="\(directory)/out.jsonl" template="fields") }
                """
            try config.write(toFile: directory + "/rsyslog.conf", atomically: true, encoding: .utf8)
        }

        func start() throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/rsyslogd")
            process.arguments = ["-n", "-f", directory + "/rsyslog.conf", "-i", directory + "/rsyslogd.pid"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            self.process = process
            for _ in 0..<100 {  // listening?
                let s = SyslogConnection(host: "127.0.0.1", port: port)
                if (try? s.connect()) != nil { return }
                usleep(50_000)
            }
            throw XCTSkip("rsyslogd did not start listening on \(port)")
        }

        func stop() {
            process?.terminate()
            process?.waitUntilExit()
            process = nil
        }

        func lines() -> [[String: String]] {
            let text = (try? String(contentsOfFile: directory + "/out.jsonl", encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
        }

        deinit { stop() }
    }

    func testEveryMessageOnceAcrossARestart() throws {
        let dir = makeTemporaryDirectory(self)
        let rsyslog = try Rsyslog(directory: dir)
        try rsyslog.start()
        let capture = try LogCapture()
        let log = try capture.logger("net")
        for i in 0..<300 { log.warning("message \(i) with \("héllo")", metadata: ["i": .init(i), "path": "/a]\"b"]) }
        let entries = try capture.entries()
        let format = SyslogFormat(facility: 16, hostname: "host1", appName: "app")
        let connection = SyslogConnection(host: "127.0.0.1", port: rsyslog.port)
        var repeats = 0
        for (index, entry) in entries.enumerated() {
            if index == 150 {
                rsyslog.stop()
                try rsyslog.start()
            }
            let frame = format.frame(for: entry).bytes
            var attempts = 0
            while true {
                if !connection.isConnected { try? connection.connect() }
                if connection.send(frame) { break }
                attempts += 1
                repeats += 1
                XCTAssertLessThan(attempts, 50, "could not deliver message \(index)")
                if attempts >= 50 { return }
                usleep(20_000)
            }
        }
        rsyslog.stop()  // flushes its queue to the file
        let lines = rsyslog.lines()
        let bodies = lines.compactMap { $0["msg"] }.map { $0.hasPrefix("\u{FEFF}") ? String($0.dropFirst()) : $0 }
        XCTAssertEqual(Set(bodies).count, 300, "every message arrived (repeats: \(repeats))")
        XCTAssertEqual(bodies.count, 300, "each once (repeats: \(repeats))")
        let first = try XCTUnwrap(lines.first)
        XCTAssertEqual(first["pri"], "132")  // local0 * 8 + warning (4)
        XCTAssertEqual(first["host"], "host1")
        XCTAssertEqual(first["app"], "app")
        XCTAssertEqual(first["msgid"], "net")
        XCTAssertEqual(first["procid"], String(entries[0].processID))
        XCTAssertTrue(first["sd"]?.contains(#"path="/a\]\"b""#) == true, first["sd"] ?? "")
    }

    /// `logbook export --syslog` to rsyslog: every record once, its fields as rsyslog parsed them,
    /// a message past the maximum size cut with the marker and counted; nothing again on a second run.
    func testTheCommandToRsyslog() throws {
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let rsyslog = try Rsyslog(directory: dir)
        try rsyslog.start()
        let bundle = try LogBundle(path: dir + "/app.logbook")
        let log = try bundle.logger("web")
        for i in 0..<1000 { log.notice("request \(i) served", metadata: ["i": .init(i)]) }
        log.info("\(String(repeating: "x", count: 9000))")
        try bundle.close()
        let arguments = ["export", "--syslog", "tcp://127.0.0.1:\(rsyslog.port)", "--app-name", "web-app", "--cursors", dir + "/cursors",
                         "--batch", "100", dir + "/app.logbook"]
        let first = try runProgram(logbook, arguments)
        XCTAssertEqual(first.status, 0, first.output)
        XCTAssertTrue(first.output.contains("exported 1001 records, 1 syslog messages truncated"), first.output)
        let second = try runProgram(logbook, arguments)
        XCTAssertTrue(second.output.contains("exported 0 records"), second.output)
        rsyslog.stop()
        let lines = rsyslog.lines()
        XCTAssertEqual(lines.count, 1001)
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
