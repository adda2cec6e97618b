import CLogbookTestSupport
import Foundation
import Logbook
import LogbookTestKit
import XCTest

/// A forked child (`lb_test_spawn`) that logs shaped records and reports every record it committed
/// over a pipe ({u32 thread, u32 kind, u64 sequence} each), until the test kills it with SIGKILL.
/// The reports are read while it runs. The pipe's capacity (4 KiB, 256 reports) bounds how far the
/// child runs ahead of what was read: a kill after `waitForReports(atLeast: n)` lands within
/// n + 256 + threads records, on any machine.
final class ReportingChild {
    let pid: pid_t
    let threads: Int
    private let readEnd: Int32
    private let flags: Int32
    private var bytes = [UInt8]()
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)

    /// Forks a child logging into `path`. With a `chunkBudget`, its threads stop once the bundle
    /// claimed that many chunks since the child opened it (bounding what a cycle writes by bytes,
    /// not by time) and wait to be killed.
    init(path: String, threads: Int, firstSequence: UInt64, chunkSize: UInt32, capacity: UInt64,
         policy: lb_wrap_policy = LB_WRAP_OVERWRITE, archiveFileSize: UInt64 = 0, chunkBudget: UInt64 = 0) {
        var fds: [Int32] = [0, 0]
        precondition(lb_test_report_pipe(&fds) == 0)
        self.threads = threads
        pid = path.withCString { cPath in
            var child = lb_test_child(
                bundle_path: cPath, report_fd: fds[1], threads: Int32(threads), first_sequence: firstSequence,
                chunk_size: chunkSize, capacity: capacity, wrap_policy: policy.rawValue,
                archive_file_size: archiveFileSize, chunk_budget: chunkBudget)
            return lb_test_spawn(&child)
        }
        close(fds[1])
        readEnd = fds[0]
        flags = fcntl(readEnd, F_GETFL)
        _ = fcntl(readEnd, F_SETFL, flags | O_NONBLOCK)
    }

    var reportedAnything: Bool { committedCount > 0 }

    /// Reads what the pipe holds; false once the child closed it (it ended).
    @discardableResult
    private func drain() -> Bool {
        while true {
            let n = read(readEnd, &buffer, buffer.count)
            if n == 0 { return false }
            if n < 0 { return true }
            bytes += buffer[0..<n]
        }
    }

    private var allReports: [(thread: UInt32, kind: UInt32, sequence: UInt64)] {
        stride(from: 0, to: bytes.count - 15, by: 16).map { offset in
            let thread = bytes[offset..<offset + 4].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            let kind = bytes[offset + 4..<offset + 8].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            let sequence = bytes[offset + 8..<offset + 16].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            return (thread, kind, sequence)
        }
    }

    private var stoppedCount = 0, committedCount = 0
    private var counted = 0  // bytes already counted into stoppedCount and committedCount

    private func count() {
        while counted + 16 <= bytes.count {
            let kind = bytes[counted + 4..<counted + 8].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            if kind == UInt32(LB_TEST_REPORT_STOPPED) { stoppedCount += 1 } else { committedCount += 1 }
            counted += 16
        }
    }

    /// Every thread spent the chunk budget and waits to be killed.
    var stopped: Bool { stoppedCount == threads }

    /// Reads reports until at least `count` records were reported or every thread stopped. The
    /// deadline (120 s) is a failsafe against a child that hangs, not part of any verdict: returns
    /// false when it passed.
    @discardableResult
    func waitForReports(atLeast count: Int) -> Bool {
        let failsafe = DispatchTime.now().uptimeNanoseconds + 120_000_000_000
        while true {
            let open = drain()
            self.count()
            if committedCount >= count || stopped { return true }
            if !open || DispatchTime.now().uptimeNanoseconds > failsafe { return false }
            usleep(200)
        }
    }

    /// Lets the child go on for `nanoseconds`, reading its reports (only for where a kill lands,
    /// never for how much the child writes: bound that with a chunk budget).
    func run(forNanoseconds nanoseconds: UInt64) {
        let until = DispatchTime.now().uptimeNanoseconds + nanoseconds
        while DispatchTime.now().uptimeNanoseconds < until {
            drain()
            usleep(500)
        }
    }

    /// SIGKILLs the child, reaps it and reads the last reports. Returns the wait status.
    func kill() -> Int32 {
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        _ = fcntl(readEnd, F_SETFL, flags)
        drain()
        close(readEnd)
        count()
        return status
    }

    /// Every reported committed record, as thread << 48 | sequence.
    var reports: [UInt64] {
        allReports.filter { $0.kind == UInt32(LB_TEST_REPORT_COMMITTED) }.map { UInt64($0.thread) << 48 | $0.sequence }
    }

    /// Where the next child's sequences should start: past every reported one, with a margin for
    /// records committed just before the kill but never reported (their numbers must not repeat).
    func nextFirstSequence(after first: UInt64) -> UInt64 {
        (reports.map { $0 & 0xFFFF_FFFF_FFFF }.max() ?? first) + 1000
    }
}
