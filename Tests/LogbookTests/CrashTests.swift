import CLogbook
import CLogbookTestSupport
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

final class CrashTests: XCTestCase {
    /// A child logs shaped records (short and long strings, metadata, records longer than a chunk)
    /// from two threads into an overwrite ring of 512 chunks and reports every committed record
    /// over a pipe; the parent kills it with SIGKILL, and the next cycle reopens the same bundle
    /// (recovery). The kill lands after a random number of reported records, not after a time, and
    /// each child stops logging once it claimed half the ring's chunks: what a cycle writes is
    /// bounded by bytes, so on any machine no cycle overwrites its own records.
    ///
    /// After each kill: every record the cycle reported is there, with its values, once; records
    /// of earlier cycles may be gone, but only oldest first and only as many as verify counts as
    /// overwritten (or unreadable: a record whose first fragments were overwritten); verify finds
    /// no failure and no record lost. Oldest first: in the chunks of the ring's newest lap, each
    /// thread's records are one unbroken run of what it reported, ending at its newest. A chunk
    /// from an older lap is there only when a kill cut short the claim that was reusing it: the
    /// claim had not touched it, so recovery keeps it, records and all (counted here, and never
    /// more than one per thread per kill).
    func testSigkillLoopLosesNoCommittedRecord() throws {
        let cycles = Int(ProcessInfo.processInfo.environment["LOGBOOK_KILL_CYCLES"] ?? "") ?? 60
        let chunkSize: UInt32 = 16 << 10, capacity: UInt64 = 8 << 20
        let path = makeTemporaryDirectory(self) + "/killed.logbook"
        var generator = SplitMix64(state: 20261121)
        var reported = Set<UInt64>()  // thread << 48 | sequence
        var nextSequence: UInt64 = 0
        var childrenThatStopped = 0, mostOlderLapChunks = 0
        for cycle in 0..<cycles {
            let first = nextSequence
            let child = ReportingChild(path: path, threads: 2, firstSequence: first, chunkSize: chunkSize,
                                       capacity: capacity, chunkBudget: capacity / UInt64(chunkSize) / 2)
            XCTAssertGreaterThan(child.pid, 0)
            if cycle % 10 == 9 {
                // Dies while opening (creation or recovery) or soon after.
                child.run(forNanoseconds: UInt64.random(in: 0...3_000_000, using: &generator))
            } else {
                // A child that spends its budget reports 6,000 to 7,000 records: most kills land
                // while it logs, some after it stopped.
                let records = Int.random(in: 1...8_000, using: &generator)
                XCTAssertTrue(child.waitForReports(atLeast: records), "cycle \(cycle): the child ended or hung before \(records) records")
            }
            let status = child.kill()
            XCTAssertTrue((status & 0x7f) == SIGKILL, "child ended with status \(status) instead of being killed")
            reported.formUnion(child.reports)
            nextSequence = child.nextFirstSequence(after: first)
            if child.stopped { childrenThatStopped += 1 }

            guard FileManager.default.fileExists(atPath: path + "/ring") else {
                // Killed while creating the bundle: legitimate only if nothing was committed.
                XCTAssertFalse(child.reportedAnything, "cycle \(cycle): records reported but no bundle")
                continue
            }
            let (lost, olderLap) = try checkKilledBundle(path, chunkSize: chunkSize, reported: reported, cycleFirst: first,
                                                         kills: cycle + 1, name: "cycle \(cycle)")
            mostOlderLapChunks = max(mostOlderLapChunks, olderLap)
            if lost { break }
        }
        XCTAssertGreaterThan(reported.count, cycles * 100, "children reported too little to prove anything")
        XCTAssertGreaterThan(childrenThatStopped, 0, "no child spent its budget: the budget is never exercised")
        print("SIGKILL loop: \(cycles) kills, \(reported.count) records reported, \(childrenThatStopped) children spent their budget, "
              + "at most \(mostOlderLapChunks) chunks of an older lap kept by claims a kill cut short")
        // The bundle is still a valid writable bundle after all that.
        let bundle = try LogBundle(path: path)
        try bundle.logger("after").info("alive \(1)")
        try bundle.close()
        XCTAssertEqual(try readBundle(path).entries.last?.message, "alive 1")
    }

    /// Checks a killed child's bundle against every record ever reported (see above). Returns
    /// whether a committed record is missing, and how many chunks of an older lap the bundle holds.
    private func checkKilledBundle(_ path: String, chunkSize: UInt32, reported: Set<UInt64>, cycleFirst: UInt64,
                                   kills: Int, name: String) throws -> (lost: Bool, olderLapChunks: Int) {
        // Read in C: checking a full ring takes about 30 ms there, 0.5 s through LogEntry in Swift.
        var read = lb_test_shaped_read()
        XCTAssertEqual(lb_test_read_shaped(path, chunkSize, &read), 0, "\(name): reading or verifying failed")
        defer { free(read.ids) }
        defer { free(read.chunk_sequences) }
        let ids = UnsafeBufferPointer(start: read.ids, count: read.count)
        let chunkSequences = UnsafeBufferPointer(start: read.chunk_sequences, count: read.count)
        let present = Set(ids)
        let summary = read.summary
        XCTAssertGreaterThanOrEqual(read.scan_result, 0, "\(name): the read failed")
        XCTAssertEqual(read.foreign, 0, "\(name): records altered or mixed with another record's bytes")
        XCTAssertEqual(present.count, ids.count, "\(name): records read twice")
        if read.failures > 0 {
            let reader = try LogReader(path: path)
            _ = try reader.readAll()
            XCTFail("\(name): \(reader.issues.filter(\.isFailure).map(\.description))")
        }
        XCTAssertTrue(summary.accounted != 0, "\(name): verify could not account for the records")
        XCTAssertEqual(summary.records_lost, 0, name)

        let sequenceMask: UInt64 = 0xFFFF_FFFF_FFFF
        let missing = reported.subtracting(present)
        // This cycle's records: all of them (the cycle wrote at most half the ring).
        let missingThisCycle = missing.filter { $0 & sequenceMask >= cycleFirst }
        XCTAssertEqual(missingThisCycle.count, 0, "\(name): \(missingThisCycle.count) records this cycle committed are missing")
        // Earlier records: only the oldest of each thread, and only as many as were overwritten.
        // The newest lap holds the chunks of the last `chunk_count` claims; older ones are there
        // only when a kill cut short the claim that was reusing them.
        let newestLap = read.next_sequence - UInt64(min(UInt64(read.chunk_count), read.next_sequence))
        var oldestPresent: [UInt64: UInt64] = [:]
        var olderLapChunks = Set<UInt64>()
        for (record, chunk) in zip(ids, chunkSequences) {
            guard chunk >= newestLap else { olderLapChunks.insert(chunk); continue }
            oldestPresent[record >> 48] = min(oldestPresent[record >> 48] ?? .max, record & sequenceMask)
        }
        XCTAssertLessThanOrEqual(olderLapChunks.count, 2 * kills, "\(name): chunks of an older lap \(olderLapChunks.sorted())")
        let missingInsideARun = missing.filter { record in
            guard let oldest = oldestPresent[record >> 48] else { return false }
            return record & sequenceMask > oldest
        }
        XCTAssertEqual(missingInsideARun.count, 0,
                       "\(name): \(missingInsideARun.count) records missing after a newer record of their thread, e.g. \(missingInsideARun.sorted().prefix(3).map { "\($0 >> 48)/\($0 & sequenceMask)" })")
        // A record whose first fragments were overwritten is counted overwritten; unreadable are
        // only records torn by the kill (no failure issue is allowed above, so nothing else is).
        let accountedFor = summary.records_overwritten + summary.records_unreadable
        XCTAssertLessThanOrEqual(UInt64(missing.count), accountedFor,
                                 "\(name): \(missing.count) records missing, verify counts \(summary.records_overwritten) overwritten and \(summary.records_unreadable) unreadable")
        return (!missingThisCycle.isEmpty || !missingInsideARun.isEmpty || UInt64(missing.count) > accountedFor, olderLapChunks.count)
    }
}
