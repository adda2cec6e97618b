import CLogbook
import CLogbookTestSupport
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

/// A fork while a bundle is open and its threads log.
final class ForkConcurrencyTests: XCTestCase {
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
        XCTAssertEqual(bundle.counters.drops[.closed], 0, "the child's refused calls touched the parent's counters")
        log.info("after fork \(2)")
        XCTAssertEqual(try LogReader(path: path).info().chunksActive, 1, "the child sealed the parent's chunk")
        try bundle.close()
        let (entries, issues) = try readBundle(path)
        XCTAssertEqual(issues.count, 0, "\(issues)")
        XCTAssertEqual(entries.map(\.message), ["before fork 1", "after fork 2"])
    }
}
