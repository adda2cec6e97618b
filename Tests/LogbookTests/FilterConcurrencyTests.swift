import Foundation
import LogbookTestKit
import XCTest
@testable @_spi(LogbookBackend) import Logbook
import CLogbook
import LogbookTesting

/// Filters and category loggers change while other threads log (run under ThreadSanitizer in CI).
final class FilterConcurrencyTests: XCTestCase {
    enum Worker: LogCategory {
        static func work(_ i: Int) { logger.info("work \(i)") }
    }

    func testRulesAndBootstrapChangeWhileThreadsLog() throws {
        let first = try LogCapture(capacity: 8 << 20)
        let second = try LogCapture(capacity: 8 << 20)
        LogBundle.bootstrap(first.bundle)
        let native = try first.logger("native.hot")
        let group = DispatchGroup()
        let stop = ManagedAtomicFlag()
        let progress = ProgressCounter()
        for _ in 0..<2 {
            DispatchQueue.global().async(group: group) {
                var i = 0
                while !stop.isSet {
                    native.debug("n \(i)")
                    Worker.work(i)
                    progress.increment()
                    i += 1
                }
            }
        }
        for round in 0..<200 {
            first.bundle.filter = try LogFilter(parsing: round % 2 == 0 ? "native=off,*=info" : "native=trace")
            if round % 50 == 25 { LogBundle.bootstrap(round % 100 == 25 ? second.bundle : first.bundle) }
            // Each round lets the workers finish at least one iteration begun after the change, so the
            // changes really interleave with logging however the two cores are scheduled. (Each worker
            // can have one iteration in flight from before, hence three.)
            guard progress.wait(forAtLeast: progress.value + 3) else {
                stop.set()
                group.wait()
                return XCTFail("the workers made no progress for 60 s (round \(round))")
            }
        }
        stop.set()
        group.wait()
        XCTAssertGreaterThan(try first.entries(logger: Worker.logCategory).count, 0)
        XCTAssertGreaterThan(try second.entries(logger: Worker.logCategory).count, 0)
        XCTAssertEqual(LogReader.issueCount(first.path), 0)
        XCTAssertEqual(LogReader.issueCount(second.path), 0)
    }
}

/// A count of iterations that another thread can wait on.
final class ProgressCounter: @unchecked Sendable {
    private let condition = NSCondition()
    private var count = 0
    var value: Int { condition.withLock { count } }
    func increment() {
        condition.withLock { count += 1 }
        condition.broadcast()
    }
    /// Waits until the count reaches `target`; false after `seconds` without it (a stuck worker
    /// fails the test instead of hanging CI).
    func wait(forAtLeast target: Int, seconds: Double = 60) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        return condition.withLock {
            while count < target { if !condition.wait(until: deadline) { return count >= target } }
            return true
        }
    }
}
