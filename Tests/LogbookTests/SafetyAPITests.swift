import Foundation
import XCTest
@testable import Logbook

/// Issue 11, "safe by default": the API refuses what it cannot do with an error that names what
/// was wrong, and does what its names say.
final class SafetyAPITests: XCTestCase {
    // MARK: A reader opened on something that is not Logbook's

    func assertRefused(_ path: String, errno expected: Int32, _ why: String, line: UInt = #line) {
        XCTAssertThrowsError(try LogReader(path: path), why, line: line) { error in
            guard let error = error as? LogbookError else { return XCTFail("\(error)", line: line) }
            XCTAssertEqual(error.errno, expected, "\(why): \(error)", line: line)
            XCTAssertEqual(error.path, path, line: line)
            XCTAssertTrue(error.description.contains(path), error.description, line: line)
        }
    }

    func testReaderOnAnythingButABundleOrArchiveThrowsNamingThePath() throws {
        let root = makeTemporaryDirectory(self)
        let empty = root + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        assertRefused(empty, errno: EPROTO, "an empty directory")

        let unrelated = root + "/unrelated"
        try FileManager.default.createDirectory(atPath: unrelated, withIntermediateDirectories: true)
        try Data("hello".utf8).write(to: URL(fileURLWithPath: unrelated + "/notes.txt"))
        try Data("x".utf8).write(to: URL(fileURLWithPath: unrelated + "/archive.lba.bak"))
        assertRefused(unrelated, errno: EPROTO, "a directory of unrelated files")

        let text = root + "/notes.txt"
        try Data("just some text, not a log\n".utf8).write(to: URL(fileURLWithPath: text))
        assertRefused(text, errno: EPROTO, "a text file")
        let noise = root + "/noise.bin"
        try Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 131) }).write(to: URL(fileURLWithPath: noise))
        assertRefused(noise, errno: EPROTO, "a binary file that is no archive file")
        let emptyFile = root + "/empty.lba"
        try Data().write(to: URL(fileURLWithPath: emptyFile))
        assertRefused(emptyFile, errno: EPROTO, "an empty file")
        XCTAssertThrowsError(try LogReader(path: text)) { error in
            XCTAssertTrue("\(error)".contains("neither a Logbook bundle nor an archive directory or file"), "\(error)")
        }

        assertRefused(root + "/does-not-exist", errno: ENOENT, "a path that does not exist")
        assertRefused(root + "/does-not-exist/ring", errno: ENOENT, "below a path that does not exist")
    }

    /// An archive file is read under any name, and one with an archive file's name is read even
    /// when its header is damaged: that is damage to report, not a file to refuse.
    func testArchiveFilesStillOpenRenamedOrDamaged() throws {
        let root = makeTemporaryDirectory(self)
        let path = root + "/a.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil))
        let log = try bundle.logger("archived")
        for i in 0..<2000 { log.info("record \(i)") }
        try bundle.close()
        let archived = path + "/archive/archive-0000000001.lba"

        let renamed = root + "/uploaded-by-the-uploader.bin"
        try FileManager.default.copyItem(atPath: archived, toPath: renamed)
        let reader = try LogReader(path: renamed)
        XCTAssertGreaterThan(try reader.readAll().count, 0)
        XCTAssertEqual(reader.issues.map(\.description), [])

        let damaged = root + "/archive-0000000007.lba"
        try Data(repeating: 0x55, count: 5000).write(to: URL(fileURLWithPath: damaged))
        let damagedReader = try LogReader(path: damaged)
        XCTAssertEqual(try damagedReader.readAll().count, 0)
        XCTAssertFalse(damagedReader.issues.isEmpty, "the damage is reported")
    }

    func testArchiveFileNames() {
        for name in ["archive-0000000001.lba", "archive-0000000012.lba.writing", "archive-9999999999.lba.unsynced"] {
            XCTAssertTrue(LogReader.isArchiveFileName(name), name)
        }
        for name in ["archive-1.lba", "archive-000000001x.lba", "archive-0000000001.lbax", "notes.txt", "archive-",
                     "xarchive-0000000001.lba", "archive-0000000001.lba.bak"] {
            XCTAssertFalse(LogReader.isArchiveFileName(name), name)
        }
    }

    // MARK: readAll() reads all

    func testReadAllReadsEverythingAgainAndReadNewOnlyWhatCameAfter() throws {
        let path = makeTemporaryDirectory(self) + "/again.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let log = try bundle.logger("again")
        for i in 0..<5 { log.info("first \(i)") }
        let reader = try LogReader(path: path)
        let first = try reader.readAll()
        XCTAssertEqual(first.map(\.message), (0..<5).map { "first \($0)" })
        let second = try reader.readAll()
        XCTAssertEqual(second.map(\.message), first.map(\.message), "readAll twice returns the same entries")
        XCTAssertEqual(second.map(\.wallNanoseconds), first.map(\.wallNanoseconds))
        XCTAssertEqual(try reader.readNew().count, 0, "nothing new since")

        for i in 0..<3 { log.info("second \(i)") }
        XCTAssertEqual(try reader.readNew().map(\.message), (0..<3).map { "second \($0)" }, "only the new ones")
        XCTAssertEqual(try reader.readAll().map(\.message),
                       (0..<5).map { "first \($0)" } + (0..<3).map { "second \($0)" }, "from the beginning")
        log.info("third")
        XCTAssertEqual(try reader.readNew().map(\.message), ["third"], "readNew after readAll: only the new one")

        // After scan(_:) too, and issues describe the last read (no duplicates from earlier ones).
        var scanned = 0
        try reader.scan { _ in scanned += 1 }
        XCTAssertEqual(scanned, 0)
        XCTAssertEqual(try reader.readAll().count, 9)
        XCTAssertEqual(reader.issues.map(\.description), [])
        try bundle.close()
        let summary = try reader.verify()
        XCTAssertEqual(summary.recordsFound, 9)
    }
}
