import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookExport
import LogbookUpload
import LogbookTesting

/// An rsyslogd of the test's own on a free port of 127.0.0.1 (TCP or RELP input), writing what it
/// receives as JSON lines: started, stopped and restarted by the test.
final class Rsyslog: @unchecked Sendable {
    let directory: String
    let port: UInt16
    var process: Process?

    init(directory: String, input: SyslogDestination.Transport = .tcp) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/rsyslogd") else { throw XCTSkip("no rsyslogd (apt-get install rsyslog)") }
        if input == .relp && !FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/rsyslog/imrelp.so") {
            throw XCTSkip("no imrelp (apt-get install rsyslog-relp)")
        }
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
        let module = input == .relp ? "imrelp" : "imtcp"
        let config = """
            global(workDirectory="\(directory)")
            main_queue(queue.timeoutShutdown="30000")
            module(load="\(module)")
            input(type="\(module)" port="\(port)" address="127.0.0.1" ruleset="out")
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
        // Listening? (Two minutes is a failsafe: it takes milliseconds, seconds on a loaded machine.)
        let listening = waitUntil {
            let s = SyslogConnection(host: "127.0.0.1", port: port)
            return (try? s.connect()) != nil || !process.isRunning
        }
        guard listening, process.isRunning else { throw TestFailure("rsyslogd did not start listening on \(port)") }
    }

    func stop() {
        process?.terminate()
        process?.waitUntilExit()
        process = nil
    }

    /// Waits until what rsyslog wrote satisfies `written` (it has written what the test needs
    /// before it is stopped: stopping it sooner on a loaded machine lost what was still in its
    /// queue, CI saw 880 of 3,000 messages). Two minutes is a failsafe; the test then checks
    /// the lines and says what is missing.
    func waitUntilWritten(_ written: ([[String: String]]) -> Bool) {
        _ = waitUntil { written(lines()) }
    }

    /// The messages rsyslog wrote, the BOM of a UTF-8 MSG removed.
    func bodies() -> [String] {
        lines().compactMap { $0["msg"] }.map { $0.hasPrefix("\u{FEFF}") ? String($0.dropFirst()) : $0 }
    }

    func lines() -> [[String: String]] {
        let text = (try? String(contentsOfFile: directory + "/out.jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
    }

    deinit { stop() }
}
