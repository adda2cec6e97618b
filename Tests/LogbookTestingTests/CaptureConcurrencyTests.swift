import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
import LogbookTesting

/// The test kit from many threads, and when it is too small (outside adversarial test findings).
final class CaptureConcurrencyTests: XCTestCase {
    /// Regression: `LogCapture` is `Sendable`, but reading it from two threads at once crashed
    /// (one `LogReader` shared without a lock); swift-testing runs tests in parallel.
    func testCaptureIsReadFromManyThreadsAtOnce() throws {
        let capture = try LogCapture()
        let log = try capture.logger("x")
        for i in 0..<1000 { log.info("e \(i)") }
        let counts = Locked([Int]())
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for round in 0..<100 {
                if round % 2 == 0 {
                    let count = (try? capture.entries().count) ?? -1
                    counts.withLock { $0.append(count) }
                } else {
                    _ = try? capture.expect(message: "e 5")
                }
                if thread == 0 { log.info("more \(round)") }
            }
        }
        XCTAssertFalse(counts.withLock { $0 }.contains { $0 < 1000 }, "every read sees at least what was logged before")
        XCTAssertEqual(try capture.entries().count, 1100)
    }

    /// A capture too small for what a test logs says so when an expectation fails, instead of
    /// listing the survivors as if they were everything.
    func testFailedExpectationSaysHowManyEntriesTheRingOverwrote() throws {
        let capture = try LogCapture(capacity: 1 << 16)
        let log = try capture.logger("x")
        for i in 0..<10_000 { log.info("entry \(i) of a capture too small for all of them") }
        XCTAssertThrowsError(try capture.expect(message: "entry 0 of a capture too small for all of them")) { error in
            let failure = error as! LogExpectationFailure
            XCTAssertGreaterThan(failure.overwritten, 0)
            XCTAssertEqual(UInt64(failure.captured.count) + failure.overwritten, 10_000)
            XCTAssertTrue("\(failure)".contains("older ones the ring overwrote: give LogCapture a larger capacity"), "\(failure)")
        }
    }
}
