import CLogbook
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

/// A full disk, on a 1 MiB tmpfs: creation fails cleanly, and once the bundle exists, logging goes
/// on into the preallocated ring; only a new call site (a meta append) can fail, and that record
/// is dropped and counted.
final class DiskFullTests: XCTestCase {
    var mountPoint: String!

    override func setUpWithError() throws {
        mountPoint = makeTemporaryDirectory(self) + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mount = try runProgram("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint])
        guard mount.status == 0 else {
            throw XCTSkip("cannot mount a tmpfs here (needs root): \(mount.output)")
        }
        let point = mountPoint!
        addTeardownBlock { _ = try? runProgram("/bin/umount", [point]) }
    }

    /// `logbook report` onto a full disk: it fails with a message, the report already at the path
    /// stays whole, and no temporary file is left behind.
    func testAReportOnAFullDiskFailsAndKeepsThePreviousOne() throws {
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let bundle = try makeBundle(makeTemporaryDirectory(self), records: 2_000)
        let report = mountPoint + "/report.html"
        try Data("previous report".utf8).write(to: URL(fileURLWithPath: report))
        // Fill the disk but for 8 KiB: the page (tens of KiB) cannot fit.
        var room = statvfs()
        statvfs(mountPoint, &room)
        let filler = open(mountPoint + "/filler", O_WRONLY | O_CREAT, 0o600)
        let block = [UInt8](repeating: 0, count: 4096)
        var left = Int(room.f_bavail) * Int(room.f_frsize) - 8192
        while left > 0, write(filler, block, min(left, block.count)) > 0 { left -= block.count }
        close(filler)

        let result = try runProgram(logbook, ["report", bundle, "-o", report])
        XCTAssertNotEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains("No space left"), result.output)
        XCTAssertEqual(try String(contentsOfFile: report, encoding: .utf8), "previous report")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: mountPoint).filter { $0.contains(".tmp-") }
        XCTAssertEqual(leftovers, [], "no temporary file is left")
    }

    func testCreatingABundleLargerThanTheDiskFailsCleanly() throws {
        let path = mountPoint + "/big.logbook"
        XCTAssertThrowsError(try LogBundle(path: path, capacity: 4 << 20, chunkSize: 16 << 10)) { error in
            XCTAssertEqual((error as! LogbookError).errno, ENOSPC, "\(error)")
            // Refused before posix_fallocate took every free block of the file system.
            XCTAssertTrue("\(error)".contains("the 4198400-byte ring does not fit: the file system has"), "\(error)")
        }
        // No half-made files keep the space.
        let left = try FileManager.default.contentsOfDirectory(atPath: path)
        XCTAssertEqual(left.filter { $0 != "lock" }, [], "left behind: \(left)")
        let small = try LogBundle(path: path, capacity: 256 << 10, chunkSize: 16 << 10)
        try small.close()
    }

    func testFullDiskKeepsLoggingIntoTheRingAndCountsWhatItCannotStore() throws {
        let path = mountPoint + "/full.logbook"
        let bundle = try LogBundle(path: path, capacity: 512 << 10, chunkSize: 16 << 10)
        let log = try bundle.logger("disk")
        func known(_ i: Int) { log.info("known site \(i)") }
        known(0)
        // Fill the rest of the disk.
        let filler = FileHandle(forWritingAtPath: mountPoint + "/filler") ?? {
            _ = FileManager.default.createFile(atPath: mountPoint + "/filler", contents: nil)
            return FileHandle(forWritingAtPath: mountPoint + "/filler")!
        }()
        let block = Data(repeating: 0, count: 4096)
        while (try? filler.write(contentsOf: block)) != nil {}
        try? filler.close()

        // The meta file's last page may still have room: use it up with sites registered from C.
        let template = String(repeating: "t", count: 500)
        var registered = 0, result: Int32 = 0
        while result == 0 && registered < 10_000 {
            registered += 1
            var site: UInt32 = 0
            result = template.withCString { text in
                var desc = lb_site_desc()
                desc.key_file = UnsafeRawPointer(bitPattern: 0x1000)
                desc.line = UInt32(registered)
                desc.template_text = text
                desc.template_length = 500
                return lb_site_register(bundle.cBundle, &desc, &site)
            }
        }
        XCTAssertEqual(result, -ENOSPC)

        for i in 1...3000 { known(i) }  // the ring is preallocated: all of this is stored
        log.warning("a new call site needs a meta entry \(1)")  // cannot be stored: dropped, counted
        XCTAssertEqual(bundle.counters.drops[.meta], 1)
        known(3001)
        try bundle.close()

        let (entries, issues) = try readBundle(path)
        XCTAssertEqual(issues.count, 0, "a failed meta append must leave no torn entry: \(issues)")
        XCTAssertEqual(entries.last?.message, "known site 3001")
        XCTAssertFalse(entries.contains { $0.level == .warning })
        // The overwrite ring kept the newest records, in order.
        let numbers = entries.compactMap { entry -> Int? in
            if case .signed(let value, _) = entry.arguments.first { return Int(value) }
            return nil
        }
        XCTAssertEqual(numbers.last, 3001)
        XCTAssertEqual(numbers.count, 3002 - numbers.first!, "a gap in the surviving records")
        XCTAssertEqual(numbers, numbers.sorted())
    }

    /// The archive directory on the full disk: the archiver reports ENOSPC (stats, ring header,
    /// close), the lossless writer drops and counts instead of blocking, the files already rolled
    /// stay intact, and once space is freed the next open archives what the ring kept.
    func testArchiveOnAFullDiskReportsItAndKeepsCompleteFiles() throws {
        let path = makeTemporaryDirectory(self) + "/archived.logbook"
        let rolled = Locked<[String]>([])
        let bundle = try LogBundle(
            path: path, capacity: 128 << 10, chunkSize: 4096, wrapPolicy: .lossless, losslessWaitMilliseconds: 0,
            // Plain files: the archiver's own ENOSPC path, without the compressor's writes in between.
            archive: ArchiveOptions(directory: mountPoint + "/archive", maxFileSize: 128 << 10, maxFiles: nil, quota: nil,
                                    compressionLevel: nil,
                                    onFileRolled: { file in rolled.withLock { $0.append(file.path) } }))
        let log = try bundle.logger("full")
        var failure: LogbookError?
        var written = 0
        while failure == nil && written < 1_000_000 {
            for _ in 0..<200 { log.info("record \(written) with some padding to fill the disk sooner"); written += 1 }
            do { try bundle.syncArchive() } catch { failure = error }
        }
        XCTAssertEqual(failure?.errno, ENOSPC, "\(String(describing: failure))")
        let stats = try XCTUnwrap(bundle.archiveStats)
        XCTAssertEqual(stats.lastError, ENOSPC)
        XCTAssertGreaterThan(stats.failures, 0)
        XCTAssertEqual(try LogReader(path: path).info().archive.lastError, ENOSPC, "logbook info shows it too")

        // The writer goes on per its policy: the ring fills, then records are dropped and counted.
        for i in 0..<100_000 { log.info("after the disk filled \(i)") }
        XCTAssertGreaterThan(bundle.counters.drops[.ringFull] ?? 0, 0)
        XCTAssertThrowsError(try bundle.close()) { XCTAssertEqual(($0 as! LogbookError).errno, ENOSPC) }

        let complete = rolled.withLock { $0 }
        XCTAssertFalse(complete.isEmpty)
        for file in complete {
            let reader = try LogReader(path: file)
            XCTAssertGreaterThan(try reader.readAll().count, 0)
            XCTAssertEqual(reader.issues.map(\.description), [], file)
        }
        let directory = try readBundle(mountPoint + "/archive")
        XCTAssertEqual(directory.issues.map(\.description), [], "a failed batch is cut off the file being written")

        // Free space; the next open archives what the ring kept.
        for file in complete { try FileManager.default.removeItem(atPath: file) }
        let reopened = try LogBundle(path: path, archive: ArchiveOptions(directory: mountPoint + "/archive", maxFiles: nil, quota: nil))
        XCTAssertEqual(reopened.archiveStats?.lagChunks, 0)
        try reopened.close()
        let last = try readBundle(mountPoint + "/archive").entries.last?.message
        XCTAssertEqual(last, "after the disk filled \(try XCTUnwrap(Int(last?.split(separator: " ").last ?? "")))")
    }
}
