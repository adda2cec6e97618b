import CLogbook
import Foundation
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

    func testCreatingABundleLargerThanTheDiskFailsCleanly() throws {
        let path = mountPoint + "/big.logbook"
        XCTAssertThrowsError(try LogBundle(path: path, capacity: 4 << 20, chunkSize: 16 << 10)) { error in
            XCTAssertEqual((error as! LogbookError).errno, ENOSPC, "\(error)")
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
            FileManager.default.createFile(atPath: mountPoint + "/filler", contents: nil)
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
        XCTAssertEqual(bundle.counters.drops["meta"], 1)
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
}
