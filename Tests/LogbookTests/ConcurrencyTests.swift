import CLogbook
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

final class ConcurrencyTests: XCTestCase {
    /// 8 threads × 100,000 messages: every record read back exactly once, per-thread order kept.
    func testEightThreadsEveryRecordExactlyOnceInOrder() throws {
        let path = makeTemporaryDirectory(self) + "/threads.logbook"
        let threads = 8, perThread = 100_000
        let bundle = try LogBundle(path: path, capacity: 64 << 20, chunkSize: 64 << 10)
        let log = try bundle.logger("load")
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for sequence in 0..<perThread {
                log.info("thread \(thread) seq \(sequence)")
            }
        }
        XCTAssertEqual(bundle.counters.records, UInt64(threads * perThread))
        try bundle.close()

        let (entries, issues) = try readBundle(path)
        XCTAssertEqual(issues.count, 0, "\(issues.prefix(5))")
        XCTAssertEqual(entries.count, threads * perThread)
        var next = [Int](repeating: 0, count: threads)
        var previousTime = Int64.min
        for entry in entries {
            guard case .signed(let t, _) = entry.arguments[0], case .signed(let s, _) = entry.arguments[1] else {
                return XCTFail("unexpected arguments \(entry.arguments)")
            }
            XCTAssertEqual(Int(s), next[Int(t)], "thread \(t) out of order")
            next[Int(t)] = Int(s) + 1
            XCTAssertGreaterThanOrEqual(entry.wallNanoseconds, previousTime)
            previousTime = entry.wallNanoseconds
        }
        XCTAssertEqual(next, [Int](repeating: perThread, count: threads))
    }

    /// A live reader following a writer sees each record once, never a torn one.
    func testLiveReaderSeesEachRecordOnce() throws {
        let path = makeTemporaryDirectory(self) + "/live.logbook"
        let bundle = try LogBundle(path: path, capacity: 32 << 20, chunkSize: 16 << 10)
        let log = try bundle.logger("live")
        let total = 200_000
        let reader = try LogReader(path: path)
        let writer = Thread {
            for i in 0..<total { log.info("live \(i) \("x")") }
        }
        writer.start()
        var seen = [Bool](repeating: false, count: total)
        var count = 0
        while !writer.isFinished || count < total {
            for entry in try reader.readNew() {
                guard case .signed(let i, _) = entry.arguments[0], entry.arguments.count == 2 else {
                    return XCTFail("torn record \(entry.arguments)")
                }
                XCTAssertFalse(seen[Int(i)], "record \(i) seen twice")
                seen[Int(i)] = true
                count += 1
            }
            if writer.isFinished && count < total { try bundle.flush() }
        }
        XCTAssertEqual(count, total)
        XCTAssertEqual(reader.issues.count, 0, "\(reader.issues.prefix(3))")
        try bundle.close()
    }
}
