import CLogbook
import CLogbookArchive
import CLogbookTestSupport
import Foundation
import LogbookTestKit
import Synchronization
import XCTest
@testable import Logbook

/// What `ArchiveTests` and `ArchiveConcurrencyTests` share.
protocol ArchiveTestCase: XCTestCase {}

extension ArchiveTestCase {
    /// Archive file names in `directory`, sorted.
    func archiveNames(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("archive-") }.sorted()
    }

    func size(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as! NSNumber).intValue
    }
}
