import CLogbook
import Foundation
import LogbookTestKit
import Synchronization
import XCTest
@testable import Logbook

/// Bundles opened and closed in turn while one thread logs to each.
final class BundleLifecycleConcurrencyTests: XCTestCase {
    /// Regression: a thread's cached writer for a closed and freed bundle matched a new bundle
    /// allocated at the same address, and every record to the new bundle was dropped.
    func testThreadLogsToEachOfManyBundlesOpenedInTurn() throws {
        let dir = makeTemporaryDirectory(self)
        let worker = WorkerThread()
        for round in 0..<20 {
            let path = dir + "/round\(round).logbook"
            do {
                let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096)
                let log = try bundle.logger("round")
                worker.run { log.info("round \(round)") }
                try bundle.close()
            }  // freed here: the next bundle may reuse its address
            XCTAssertEqual(try readBundle(path).entries.map(\.message), ["round \(round)"], "round \(round)")
        }
    }
}
