import CLogbook
import CLogbookTestSupport
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

/// A large record whose continuation is lost (its chunk damaged, or a crash) must not hold the read
/// window back: the window would then keep every later record until the end of the read.
final class OrphanedFragmentTests: XCTestCase {
    func testALostContinuationDoesNotHoldTheWindow() throws {
        let path = makeTemporaryDirectory(self) + "/orphan.logbook"
        let chunkSize = 4096
        let bundle = try LogBundle(path: path, capacity: 8 << 20, chunkSize: chunkSize)
        let log = try bundle.logger("orphan")
        log.info("large \(String(repeating: "L", count: 3 * chunkSize))")  // FIRST, MIDDLE…, LAST
        for i in 0..<60_000 { log.info("small \(i)") }
        try bundle.close()

        // Damage the header of the chunk that continues the large record (it starts with a
        // MIDDLE fragment): the record's end never comes.
        let fd = open(path + "/ring", O_RDWR)
        defer { close(fd) }
        var damaged = false
        for slot in 0..<((8 << 20) / chunkSize) where !damaged {
            let at = off_t(LB_RING_HEADER_SIZE) + off_t(slot * chunkSize)
            var word: UInt64 = 0
            guard pread(fd, &word, 8, at + off_t(LB_CHUNK_HEADER_SIZE)) == 8 else { break }
            if lb_record_word_kind(word) == UInt8(LB_RECORD_MIDDLE.rawValue) {
                var garbage = [UInt8](repeating: 0xA5, count: 16)
                XCTAssertEqual(pwrite(fd, &garbage, 16, at), 16)
                damaged = true
            }
        }
        XCTAssertTrue(damaged, "a chunk starting with a middle fragment was found")

        let reader = try LogReader(path: path)
        var count = 0, last = Int64.min, outOfOrder = 0
        try reader.stream { record in
            count += 1
            if record.wallNanoseconds < last { outOfOrder += 1 }
            last = record.wallNanoseconds
        }
        XCTAssertEqual(count, 60_000, "every small record")
        XCTAssertEqual(outOfOrder, 0)
        XCTAssertLessThanOrEqual(lb_reader_window_peak(reader.raw), 4, "the orphaned fragment held the window back")
        XCTAssertTrue(reader.issues.contains { $0.kind == .corrupt }, "the damaged chunk is reported")
    }

    /// A large record left unfinished by a session (its writer died) does not hold the window
    /// for the sessions after it (found by adversarial review: every later chunk was held).
    func testAnUnfinishedRecordOfAnEarlierSessionDoesNotHoldTheWindow() throws {
        let path = makeTemporaryDirectory(self) + "/sessions.logbook"
        let chunkSize = 4096
        do {
            let bundle = try LogBundle(path: path, capacity: 8 << 20, chunkSize: chunkSize)
            try bundle.logger("first").info("large \(String(repeating: "L", count: 3 * chunkSize))")
            try bundle.close()
        }
        // Its continuation is damaged (every chunk after the first fragment's): the record's end
        // never comes, and nothing of its thread follows in this session.
        let fd = open(path + "/ring", O_RDWR)
        for slot in 0..<((8 << 20) / chunkSize) {
            let at = off_t(LB_RING_HEADER_SIZE) + off_t(slot * chunkSize)
            var word: UInt64 = 0
            guard pread(fd, &word, 8, at + off_t(LB_CHUNK_HEADER_SIZE)) == 8 else { break }
            let kind = lb_record_word_kind(word)
            if kind == UInt8(LB_RECORD_MIDDLE.rawValue) || kind == UInt8(LB_RECORD_LAST.rawValue) {
                var garbage = [UInt8](repeating: 0xA5, count: 16)
                _ = pwrite(fd, &garbage, 16, at)
            }
        }
        close(fd)
        do {
            // Another thread (another thread id) writes the next session.
            let bundle = try LogBundle(path: path, capacity: 8 << 20, chunkSize: chunkSize)
            let log = try bundle.logger("second")
            let writer = Thread { for i in 0..<60_000 { log.info("small \(i)") } }
            writer.start()
            while !writer.isFinished { usleep(1_000) }
            try bundle.close()
        }
        let reader = try LogReader(path: path)
        var count = 0
        try reader.stream { _ in count += 1 }
        XCTAssertEqual(count, 60_000)
        XCTAssertLessThanOrEqual(lb_reader_window_peak(reader.raw), 4)
    }

    /// A record whose argument took long to evaluate is far older than the chunks it lands in,
    /// which other threads filled meanwhile: keeping it in order would hold all of them, so the
    /// window stops at 64 MiB of chunks (found by adversarial review: 9,376 of 9,380 chunks held).
    func testASlowRecordCannotHoldTheWholeBundle() throws {
        let path = makeTemporaryDirectory(self) + "/slow.logbook"
        let chunkSize = 64 << 10, padding = String(repeating: "p", count: 80)
        let bundle = try LogBundle(path: path, capacity: 96 << 20, chunkSize: chunkSize)
        let slow = try bundle.logger("slow"), busy = try bundle.logger("busy")
        let scratch = UnsafeMutablePointer<CChar>.allocate(capacity: 4 * chunkSize)
        defer { scratch.deallocate() }
        let records = 720_000  // ~72 MiB: more than the window's 64 MiB
        let busyThread = Thread {
            for i in 0..<records { busy.info("busy \(i) \(padding)") }
        }
        busyThread.start()
        lb_test_log_slow_record(slow.cLogger, 4_000, UInt32(3 * chunkSize), scratch)
        while !busyThread.isFinished { usleep(1_000) }
        try bundle.close()
        let reader = try LogReader(path: path)
        var count = 0
        try reader.stream { _ in count += 1 }
        XCTAssertEqual(count, records + 1, "every record once")
        let peak = Int(lb_reader_window_peak(reader.raw))
        XCTAssertLessThanOrEqual(peak * chunkSize, (64 << 20) + chunkSize, "the window stops at 64 MiB")
        XCTAssertEqual(try reader.verify().recordsLost, 0)
    }
}
