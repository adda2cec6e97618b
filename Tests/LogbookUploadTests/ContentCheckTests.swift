import CLogbook
import CLogbookUpload
import Foundation
import Logbook
import LogbookTestKit
import XCTest
@testable import LogbookUpload

/// The content checks of the HTTP layer (logbook_content_check.h), byte by byte: every single-byte
/// change of an archive file the check covers is caught, before its last byte; cuts and growth too.
final class ContentCheckTests: XCTestCase {
    /// Checks `bytes` as the transport does (in steps of `step`); nil when they pass.
    func failure(_ bytes: [UInt8], kind: lb_content_check_kind, length: Int? = nil, digest: [UInt8] = [], prefix: [UInt8] = [],
                 file: String? = nil, step: Int = 4096) -> String? {
        var check = lb_content_check()
        let fd = file.map { open($0, O_RDONLY) } ?? -1
        defer { if fd >= 0 { close(fd) } }
        var digestBytes = digest + [UInt8](repeating: 0, count: max(0, 32 - digest.count))
        let initialised = prefix.withUnsafeBytes { p in
            digestBytes.withUnsafeMutableBufferPointer { d in
                lb_content_check_init(&check, Int32(kind.rawValue), UInt64(length ?? bytes.count), d.baseAddress,
                                      p.count > 0 ? p.baseAddress : nil, p.count, fd)
            }
        }
        defer { lb_content_check_free(&check) }
        if initialised != 0 { return String(cString: lb_content_check_reason(&check)) }
        var at = 0
        while at < bytes.count {
            let n = min(step, bytes.count - at)
            let rc = bytes[at..<at + n].withUnsafeBytes { lb_content_check_update(&check, $0.baseAddress, n) }
            if rc != 0 { return String(cString: lb_content_check_reason(&check)) }
            at += n
        }
        return lb_content_check_finish(&check) == 0 ? nil : String(cString: lb_content_check_reason(&check))
    }

    func archive(compressed: Bool) throws -> (path: String, bytes: [UInt8], prefix: [UInt8]) {
        let dir = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: dir + "/app.logbook", capacity: 4 * 65536, chunkSize: 65536,
                                   archive: ArchiveOptions(compressionLevel: compressed ? 1 : nil))
        let log = try bundle.logger("x")
        for i in 0..<3000 { log.info("record \(i) with some text to fill \(Double(i) * 1.5)") }
        try bundle.rollArchive()
        try bundle.close()
        let name = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: dir + "/app.logbook/archive")
            .filter { $0.hasSuffix(compressed ? ".lba.zst" : ".lba") }.sorted().first)
        let path = dir + "/app.logbook/archive/" + name
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        return (path, bytes, Array(bytes[0..<(compressed ? 72 : 64)]))
    }

    func testEveryByteOfAnArchiveFileIsChecked() throws {
        let (path, bytes, prefix) = try archive(compressed: false)
        XCTAssertNil(failure(bytes, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: path))
        XCTAssertNil(failure(bytes, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: path, step: 1), "any split")
        var caught = 0
        for offset in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 3000)) {
            var changed = bytes
            changed[offset] ^= 0x01
            // The header is compared with the one the key was read from, every frame by its CRCs.
            XCTAssertNotNil(failure(changed, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: path), "byte \(offset) of \(bytes.count)")
            caught += 1
        }
        for cut in [1, 8, 80, bytes.count / 2] {
            XCTAssertNotNil(failure(Array(bytes.dropLast(cut)), kind: LB_CONTENT_CHECK_ARCHIVE, length: bytes.count - cut, prefix: prefix, file: path), "cut \(cut)")
        }
        XCTAssertNotNil(failure(bytes + [0, 0, 0, 0, 0, 0, 0, 0], kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: path), "grown")
        XCTAssertGreaterThan(caught, 2000)
    }

    /// A .lba.zst: every byte is checked, its data frames by the CRC-32C of their bytes as stored
    /// (`compressed_crc`); in a file written before that was recorded (the field 0), by what they
    /// decompress to.
    func testEveryByteOfACompressedArchiveFileIsChecked() throws {
        let (path, bytes, prefix) = try archive(compressed: true)
        XCTAssertNil(failure(bytes, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: path, step: 7))
        // The same file as an older archiver wrote it: no compressed_crc, the table's and footer's CRCs made again.
        var old = bytes
        let footer = old.count - 64
        func u64(_ at: Int) -> Int { Int(old[at..<at + 8].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }) }
        func put32(_ value: UInt32, at: Int) { withUnsafeBytes(of: value.littleEndian) { old.replaceSubrange(at..<at + 4, with: $0) } }
        let table = u64(footer + 32), frames = Int(old[footer + 40..<footer + 44].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
        for frame in 0..<frames { put32(0, at: table + frame * 16 + 12) }
        put32(old[table..<footer].withUnsafeBytes { lb_crc32c(0, $0.baseAddress, $0.count) }, at: footer + 44)
        put32(old[footer..<footer + 60].withUnsafeBytes { lb_crc32c(0, $0.baseAddress, $0.count) }, at: footer + 60)
        let oldPath = path + ".old"
        try Data(old).write(to: URL(fileURLWithPath: oldPath))
        XCTAssertNil(failure(old, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: oldPath, step: 4096), "decompressed and checked")
        // What a .lba.zst decompresses to (zstd skips Logbook's skippable frames): the archive file.
        func decompressed(_ content: [UInt8]) throws -> String {
            let file = path + ".probe"
            try Data(content).write(to: URL(fileURLWithPath: file))
            return try runProgram("/usr/bin/env", ["sh", "-c", "zstd -q -d -c '\(file)' | sha256sum"]).output
        }
        let original = try decompressed(bytes)
        for (name, content, file) in [("recorded", bytes, path), ("decompressed", old, oldPath)] {
            var caught = 0, invisible = 0
            for offset in 0..<content.count {  // every byte: which one zstd ignores depends on the content
                var changed = content
                changed[offset] ^= 0x01
                // The tail (table, footer) is read from the file before the first byte: here the
                // file keeps the original, so the streamed bytes must equal it.
                if failure(changed, kind: LB_CONTENT_CHECK_ARCHIVE, prefix: prefix, file: file) != nil {
                    caught += 1
                } else if name == "decompressed" {
                    // Checked by what it decompresses to, a change zstd never reads (a window
                    // size, unused bits) passes, and only such a change.
                    XCTAssertEqual(try decompressed(changed), original, "byte \(offset): passed, and decompresses to other bytes")
                    invisible += 1
                } else {
                    XCTFail("\(name): byte \(offset) of \(content.count) passed")
                }
            }
            XCTAssertGreaterThan(caught, content.count - 40, name)
            XCTAssertLessThan(invisible, 40, name)
            XCTAssertNotNil(failure(Array(content.dropLast(1)), kind: LB_CONTENT_CHECK_ARCHIVE, length: content.count - 1, prefix: prefix, file: file), name)
        }
    }

    func testSHA256AndSize() {
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var hasher = SHA256()
        bytes.withUnsafeBytes { hasher.update($0) }
        let digest = hasher.finish()
        XCTAssertNil(failure(bytes, kind: LB_CONTENT_CHECK_SHA256, digest: digest))
        for offset in [0, 1, 4095, 4096, 50_000, 99_999] {
            var changed = bytes
            changed[offset] &+= 1
            XCTAssertEqual(failure(changed, kind: LB_CONTENT_CHECK_SHA256, digest: digest), "another SHA-256 than its key", "byte \(offset)")
        }
        XCTAssertNotNil(failure(Array(bytes.dropLast()), kind: LB_CONTENT_CHECK_SHA256, length: bytes.count, digest: digest))
        XCTAssertNotNil(failure(bytes + [0], kind: LB_CONTENT_CHECK_SIZE, length: bytes.count))
        XCTAssertNil(failure(bytes, kind: LB_CONTENT_CHECK_SIZE))
    }
}
