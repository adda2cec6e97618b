import CLogbook
import CLogbookTestSupport
import Foundation
import XCTest
@testable import Logbook

final class CrashTests: XCTestCase {
    /// A child logs from two threads and reports every committed sequence number over a pipe; the
    /// parent kills it with SIGKILL at a random moment. Every reported record must be in the
    /// bundle, nothing invalid may be shown, and the next cycle reopens the same bundle (recovery).
    func testSigkillLoopLosesNoCommittedRecord() throws {
        let cycles = Int(ProcessInfo.processInfo.environment["LOGBOOK_KILL_CYCLES"] ?? "") ?? 60
        let path = makeTemporaryDirectory(self) + "/killed.logbook"
        var generator = SplitMix64(state: 20261121)
        var reported = Set<UInt64>()  // thread << 48 | sequence
        var nextSequence: UInt64 = 0
        for cycle in 0..<cycles {
            let first = nextSequence
            let child = ReportingChild { lb_test_spawn_logging_child(path, $0, 2, first, 16 << 10, 8 << 20) }
            XCTAssertGreaterThan(child.pid, 0)
            // Every tenth child dies while opening (creation or recovery); the others once they
            // log, 0–15 ms in.
            if cycle % 10 != 9 {
                child.waitForReports(atLeast: 1)
                XCTAssertTrue(child.reportedAnything, "cycle \(cycle): child logged nothing within 10 s")
            }
            child.run(forNanoseconds: UInt64.random(in: 0...15_000_000, using: &generator))
            let status = child.kill()
            XCTAssertTrue((status & 0x7f) == SIGKILL, "child ended with status \(status) instead of being killed")
            reported.formUnion(child.reports)
            nextSequence = child.nextFirstSequence(after: first)
            let reportedThisCycle = child.reportedAnything

            // The ring (8 MiB) holds far more than one cycle writes, but not all cycles: check
            // what this cycle reported, and that everything shown is valid.
            guard FileManager.default.fileExists(atPath: path + "/ring") else {
                // Killed while creating the bundle: legitimate only if nothing was committed.
                XCTAssertFalse(reportedThisCycle, "cycle \(cycle): records reported but no bundle")
                continue
            }
            let (entries, issues) = try readBundle(path)
            XCTAssertTrue(issues.allSatisfy { !$0.isFailure }, "cycle \(cycle): \(issues.prefix(3))")
            var present = Set<UInt64>()
            for entry in entries {
                guard let (thread, sequence) = ShapedRecord.identify(entry, chunkSize: 16 << 10) else {
                    return XCTFail("cycle \(cycle): invalid record \(entry.arguments.prefix(2))")
                }
                XCTAssertTrue(present.insert(UInt64(thread) << 48 | sequence).inserted, "duplicate \(thread)/\(sequence)")
                XCTAssertEqual(entry.template, ShapedRecord.template)
            }
            let thisCycle = reported.filter { ($0 & 0xFFFF_FFFF_FFFF) >= first }
            let missing = thisCycle.subtracting(present)
            XCTAssertTrue(missing.isEmpty, "cycle \(cycle): \(missing.count) committed records missing")
            if !missing.isEmpty { break }
        }
        XCTAssertGreaterThan(reported.count, cycles, "children reported too little to prove anything")
        // The bundle is still a valid writable bundle after all that.
        let bundle = try LogBundle(path: path)
        try bundle.logger("after").info("alive \(1)")
        try bundle.close()
        XCTAssertEqual(try readBundle(path).entries.last?.message, "alive 1")
    }
}

final class ForkTests: XCTestCase {
    /// A child forked after the bundle was opened inherits the parent's thread writers, chunks and
    /// meta offset. It must not write to the inherited bundle (that would interleave with the
    /// parent's chunks) nor seal the parent's chunks when it closes it.
    func testForkedChildCannotWriteOrDisturbTheInheritedBundle() throws {
        let path = makeTemporaryDirectory(self) + "/fork.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10, idleSealMilliseconds: 0)
        let log = try bundle.logger("parent")
        log.info("before fork \(1)")
        let status = lb_test_fork_and_log_inherited(log.cLogger, 100)
        XCTAssertEqual(status, 0, "the child could write to the inherited bundle, or its close failed")
        XCTAssertEqual(bundle.counters.drops["closed"], 0, "the child's refused calls touched the parent's counters")
        log.info("after fork \(2)")
        XCTAssertEqual(try LogReader(path: path).info().chunksActive, 1, "the child sealed the parent's chunk")
        try bundle.close()
        let (entries, issues) = try readBundle(path)
        XCTAssertEqual(issues.count, 0, "\(issues)")
        XCTAssertEqual(entries.map(\.message), ["before fork 1", "after fork 2"])
    }
}
