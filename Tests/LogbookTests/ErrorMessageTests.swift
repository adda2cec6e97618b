import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
import LogbookTesting

/// Errors a user can act on: they name the option and its range, the directory that failed, and
/// say "the bundle is closed" for every call after close.
final class ErrorMessageTests: XCTestCase {
    func testInvalidOptionsNameTheOptionTheValueAndTheRange() {
        let path = makeTemporaryDirectory(self) + "/options.logbook"
        func message(_ open: () throws -> Void) -> String {
            do { try open() } catch { return "\(error)" }
            return "no error"
        }
        XCTAssertTrue(message { _ = try LogBundle(path: path, chunkSize: 1000) }
            .contains("chunk size 1000 is not a power of two from 4096 to 16777216 bytes"))
        XCTAssertTrue(message { _ = try LogBundle(path: path, capacity: 0) }
            .contains("capacity 0 bytes holds 0 chunks of 65536 bytes; a ring needs 2 to"))
        XCTAssertTrue(message { _ = try LogBundle(path: path, archive: ArchiveOptions(maxFileSize: 1)) }
            .contains("max file size 1 bytes is under the minimum of 65536 bytes"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "nothing is created for bad options")
    }

    /// Regression (outside adversarial test): negative or too large values were clamped before the
    /// check, so the error named a value the caller never gave, or none was raised at all.
    func testValuesTheOptionsCannotHoldAreRefusedAsGiven() {
        let path = makeTemporaryDirectory(self) + "/range.logbook"
        let cases: [(String, () throws -> Void)] = [
            ("capacity -1 bytes is negative", { _ = try LogBundle(path: path, capacity: -1) }),
            ("chunk size -65536 is not a power of two", { _ = try LogBundle(path: path, chunkSize: -65536) }),
            ("chunk size 4295032832 is not a power of two", { _ = try LogBundle(path: path, chunkSize: (1 << 32) + 65536) }),
            ("idle seal -1 ms is out of range", { _ = try LogBundle(path: path, idleSealMilliseconds: -1) }),
            ("lossless wait -1 ms is out of range", { _ = try LogBundle(path: path, losslessWaitMilliseconds: -1) }),
            ("max file size -1 bytes is under the minimum", { _ = try LogBundle(path: path, archive: ArchiveOptions(maxFileSize: -1)) }),
            ("quota -1 bytes is negative", { _ = try LogBundle(path: path, archive: ArchiveOptions(quota: -1)) }),
            ("max files -1 is out of range", { _ = try LogBundle(path: path, archive: ArchiveOptions(maxFiles: -1)) }),
            ("max files 0 is out of range", { _ = try LogBundle(path: path, archive: ArchiveOptions(maxFiles: 0)) }),
            ("max files 4294967296 is out of range", { _ = try LogBundle(path: path, archive: ArchiveOptions(maxFiles: 1 << 32)) }),
            ("roll interval -5.0 seconds is negative", { _ = try LogBundle(path: path, archive: ArchiveOptions(rollInterval: .seconds(-5))) }),
        ]
        for (expected, open) in cases {
            XCTAssertThrowsError(try open(), expected) { error in
                XCTAssertEqual((error as? LogbookError)?.errno, EINVAL, expected)
                XCTAssertTrue("\(error)".contains(expected), "\(error) lacks \(expected)")
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "nothing is created for bad options")
    }

    /// Regression (outside adversarial test): a closed bundle's logger, logging at a new call site,
    /// appended a site entry to meta at its old end, over the entries of the writer that opened the
    /// bundle next: every record of that writer lost its call site.
    func testLoggingAfterCloseNeverTouchesTheNextWritersFiles() throws {
        let path = makeTemporaryDirectory(self) + "/late.logbook"
        let old = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let oldLog = try old.logger("old")
        oldLog.info("before close \(1)")
        try old.close()
        let next = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let nextLog = try next.logger("next")
        for i in 0..<100 { nextLog.info("next writer \(i)") }
        oldLog.warning("a new call site after close \(2)")
        oldLog.error("another \(3)")
        try next.close()
        let (entries, issues) = try readBundle(path)
        XCTAssertEqual(issues.map(\.description), [])
        XCTAssertEqual(entries.count, 101)
        XCTAssertEqual(entries.filter { $0.message.hasPrefix("next writer") }.count, 100)
        XCTAssertGreaterThanOrEqual(old.counters.drops[.closed] ?? 0, 2)
    }

    /// Regression: the second writer of an archived bundle got "Resource temporarily unavailable".
    func testSecondWriterGetsOneMessageWithOrWithoutAnArchiver() throws {
        let path = makeTemporaryDirectory(self) + "/locked.logbook"
        let first = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        for archive in [nil, ArchiveOptions()] {
            XCTAssertThrowsError(try LogBundle(path: path, archive: archive)) { error in
                let error = error as! LogbookError
                XCTAssertTrue(error.isLockedByAnotherWriter)
                XCTAssertTrue("\(error)".contains(": another process is writing to this bundle (errno"), "\(error)")
            }
        }
        try first.close()
    }

    /// Regression: a failing archive directory was reported under the bundle's path only.
    func testFailingArchiveDirectoryIsNamed() throws {
        let dir = makeTemporaryDirectory(self)
        let notADirectory = dir + "/plain-file"
        _ = FileManager.default.createFile(atPath: notADirectory, contents: Data("x".utf8))
        XCTAssertThrowsError(try LogBundle(path: dir + "/a.logbook", archive: ArchiveOptions(directory: notADirectory))) { error in
            XCTAssertTrue("\(error)".contains("archive directory '\(notADirectory)' is not a directory"), "\(error)")
        }
        let shared = dir + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        chmod(shared, 0o777)
        XCTAssertThrowsError(try LogBundle(path: dir + "/b.logbook", archive: ArchiveOptions(directory: shared))) { error in
            XCTAssertEqual((error as! LogbookError).errno, EPERM)
            XCTAssertTrue("\(error)".contains("archive directory '\(shared)' is writable by every user (mode 0777)"), "\(error)")
        }
        XCTAssertThrowsError(try LogBundle(path: shared)) { error in
            XCTAssertTrue("\(error)".contains("bundle directory '\(shared)' is writable by every user"), "\(error)")
        }
    }

    /// Regression: flush() after close() said "Bad file descriptor"; close() twice and logger()
    /// after close said nothing.
    func testEveryCallAfterCloseSaysTheBundleIsClosed() throws {
        let bundle = try LogBundle(path: makeTemporaryDirectory(self) + "/closed.logbook", capacity: 1 << 20,
                                   chunkSize: 16 << 10, archive: ArchiveOptions())
        _ = try bundle.logger("before")
        try bundle.close()
        let calls: [(String, () throws -> Void)] = [
            ("close", { try bundle.close() }),
            ("flush", { try bundle.flush() }),
            ("logger", { _ = try bundle.logger("after") }),
            ("logger of an earlier name", { _ = try bundle.logger("before") }),
            ("rollArchive", { try bundle.rollArchive() }),
            ("syncArchive", { try bundle.syncArchive() }),
        ]
        for (name, call) in calls {
            XCTAssertThrowsError(try call(), name) { error in
                let error = error as! LogbookError
                XCTAssertTrue(error.isClosed, "\(name): \(error)")
                XCTAssertTrue("\(error)".contains(": the bundle is closed (errno"), "\(name): \(error)")
            }
        }
    }
}
