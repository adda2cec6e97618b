import CLogbook
import CLogbookTestSupport
import Foundation
import XCTest
@testable import Logbook

/// The streaming reader (`LogReader.stream`, `lb_reader_stream`): the same entries as the holding
/// read, in time order, filters decided before decoding, lines rendered from borrowed records
/// byte for byte as from decoded entries, and memory bounded by the window.
final class StreamingReaderTests: XCTestCase {
    struct Failure: Error {}

    /// Records of every argument type, text that needs escaping, metadata and errors, call sites
    /// with more or fewer arguments than placeholders, from three loggers.
    func writeVariedBundle(_ path: String, records: Int) throws {
        let bundle = try LogBundle(path: path, capacity: 4 << 20, chunkSize: 16 << 10)
        let loggers = try ["net", "net.http", "db\u{1b}[31m"].map { try bundle.logger($0) }
        let texts = ["plain", "", "quote \" and \\ back", "tab\there", "ünïcödé ✓", "\u{202E}rtl", "new\nline", "{}"]
        for i in 0..<records {
            let log = loggers[i % 3]
            let text = texts[i % texts.count]
            switch i % 9 {
            case 0: log.info("request \(i) took \(Double(i) * 0.25) ms ok=\(i & 1 == 1)")
            case 1: log.debug("text \(text) and \(Int8(truncatingIfNeeded: i)) \(UInt16(truncatingIfNeeded: i))")
            case 2: log.warning("float \(Float(i) / 3) double \(Double.infinity) nan \(Double.nan)")
            case 3: log.notice("secret \(text, privacy: .private) shown \(i, privacy: .public)")
            case 4: log.error("failed \(i)", metadata: ["peer": "10.0.0.\(i % 255)", "n": "\(i)"])
            case 5: log.critical("no arguments at all {} {}")
            case 6: log.trace("unsigned \(UInt64.max - UInt64(i)) signed \(Int64.min + Int64(i)) \(Int32(-5))")
            case 7: log.info("bytes-free \(text) \(text) \(i)")
            default: log.error("job \(i) failed", error: CocoaLikeError(code: i))
            }
        }
        try bundle.close()
    }

    struct CocoaLikeError: Error, CustomStringConvertible {
        let code: Int
        var description: String { "code \(code) \u{7}" }
    }

    func testRenderingARecordEqualsRenderingItsEntry() throws {
        let path = makeTemporaryDirectory(self) + "/varied.logbook"
        try writeVariedBundle(path, records: 2_000)
        var fast = LineRenderer(), slow = LineRenderer()
        var count = 0, mismatches: [String] = []
        try LogReader(path: path).stream { record in
            for format in [LineRenderer.Format.text(includeSource: false), .text(includeSource: true), .json] {
                fast.removeAll()
                slow.removeAll()
                fast.append(record, as: format)
                slow.append(record.entry, as: format)
                if fast.bytes != slow.bytes, mismatches.count < 5 {
                    mismatches.append(String(decoding: fast.bytes, as: UTF8.self) + " vs " + String(decoding: slow.bytes, as: UTF8.self))
                }
            }
            count += 1
        }
        XCTAssertEqual(count, 2_000)
        XCTAssertTrue(mismatches.isEmpty, mismatches.joined(separator: "\n"))
    }

    func testStreamFindsWhatReadAllFindsInTheSameOrder() throws {
        let path = makeTemporaryDirectory(self) + "/varied.logbook"
        try writeVariedBundle(path, records: 5_000)
        let all = try LogReader(path: path).readAll()
        var streamed: [LogEntry] = []
        try LogReader(path: path).stream { streamed.append($0.entry) }
        XCTAssertEqual(streamed.count, all.count)
        XCTAssertTrue(zip(streamed, all).allSatisfy { $0.textLine() == $1.textLine() && $0.chunkOffset == $1.chunkOffset },
                      "streamed entries differ from readAll's")
    }

    /// Level, time and logger filters are decided in C: the same entries as filtering afterwards.
    func testFiltersPassWhatFilteringAfterwardsPasses() throws {
        let path = makeTemporaryDirectory(self) + "/varied.logbook"
        try writeVariedBundle(path, records: 3_000)
        let all = try LogReader(path: path).readAll()
        let middle = all[all.count / 3].wallNanoseconds, late = all[2 * all.count / 3].wallNanoseconds
        let filters: [(LogReader.Filter, (LogEntry) -> Bool)] = [
            (.init(minimumLevel: .warning), { ($0.level ?? .critical) >= .warning }),
            (.init(maximumLevel: .debug), { $0.rawLevel <= LogLevel.debug.rawValue }),
            (.init(sinceNanoseconds: middle), { $0.wallNanoseconds >= middle }),
            (.init(sinceNanoseconds: middle, untilNanoseconds: late), { $0.wallNanoseconds >= middle && $0.wallNanoseconds < late }),
            (.init(loggers: ["net"]), { $0.logger == "net" || $0.logger == "net.http" }),
            (.init(loggers: ["net.http"]), { $0.logger == "net.http" }),
            (.init(minimumLevel: .info, site: { template, _, _, _ in template?.hasPrefix("request") == true }),
             { $0.template?.hasPrefix("request") == true && ($0.level ?? .critical) >= .info }),
        ]
        for (index, (filter, predicate)) in filters.enumerated() {
            var streamed: [String] = []
            let reader = try LogReader(path: path)
            try reader.stream(where: filter) { streamed.append($0.entry.textLine()) }
            let expected = all.filter(predicate).map { $0.textLine() }
            XCTAssertGreaterThan(expected.count, 0, "filter \(index) passes something")
            XCTAssertTrue(streamed == expected, "filter \(index): \(streamed.count) streamed, \(expected.count) expected")
            // Skipped records still count as read: verify is clean.
            let summary = try reader.verify()
            XCTAssertEqual(summary.recordsLost, 0, "filter \(index)")
            XCTAssertEqual(summary.recordsFound, UInt64(all.count), "filter \(index)")
        }
    }

    /// An error thrown by the closure stops the entries and comes back; the reader still reads to
    /// the end of what was new, so that nothing is reported missing or torn and the next read
    /// starts after it — also with archive files (an adversarial test found them dropped).
    func testAThrowingClosureStopsTheEntriesAndTheReaderStaysWhole() throws {
        let directory = makeTemporaryDirectory(self)
        let path = directory + "/archived.logbook"
        let bundle = try LogBundle(path: path, capacity: 16 << 10, chunkSize: 4 << 10, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 60_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil))
        let log = try bundle.logger("stop")
        for i in 0..<20_000 { log.info("record \(i) with \(String(repeating: "x", count: i % 300))") }
        try bundle.close()
        XCTAssertGreaterThan(try LogReader(path: path).archiveFiles().files, 3)
        for stopAfter in [1, 10, 5_000] {
            let reader = try LogReader(path: path)
            var seen = 0
            XCTAssertThrowsError(try reader.stream { _ in
                seen += 1
                if seen == stopAfter { throw Failure() }
            }) { XCTAssertTrue($0 is Failure) }
            XCTAssertEqual(seen, stopAfter)
            var rest = 0
            try reader.stream { _ in rest += 1 }
            XCTAssertEqual(rest, 0, "the stopped read went to the end of what was new")
            let summary = try reader.verify()
            XCTAssertEqual(summary.recordsFound, 20_000, "stop after \(stopAfter)")
            XCTAssertEqual(summary.recordsLost, 0)
            XCTAssertEqual(reader.issues.map(\.description), [], "stop after \(stopAfter)")
        }
    }

    /// Memory is bounded by the window, not by the bundle: streaming 400,000 records (~20 MB of
    /// records, about 300 chunks) from two threads holds a few chunks at once.
    ///
    /// The threads take turns of 1,000 records, so that their chunks overlap in time as much on
    /// any machine: left to the scheduler, a thread preempted between a record's timestamp and its
    /// chunk's claim makes that chunk start before every chunk the other thread fills meanwhile
    /// (tens on a loaded machine), and the window rightly holds them all.
    func testTheWindowDoesNotGrowWithTheBundle() throws {
        let path = makeTemporaryDirectory(self) + "/big.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 20, chunkSize: 64 << 10, idleSealMilliseconds: 0)
        let log = try bundle.logger("big")
        let turns = [DispatchSemaphore(value: 1), DispatchSemaphore(value: 0)]
        let group = DispatchGroup()
        for half in 0..<2 {
            group.enter()
            Thread.detachNewThread {  // not a queue: it may run the two one after the other
                for turn in stride(from: half, to: 400, by: 2) {
                    turns[half].wait()
                    for i in turn * 1000..<(turn + 1) * 1000 { log.info("request \(i) took \(Double(i) * 0.25) ms") }
                    turns[1 - half].signal()
                }
                group.leave()
            }
        }
        group.wait()
        try bundle.close()
        var count = 0, largestWindow = 0
        let reader = try LogReader(path: path)
        try reader.stream { _ in count += 1 }
        largestWindow = Int(lb_reader_window_peak(reader.raw))
        XCTAssertEqual(count, 400_000)
        XCTAssertLessThanOrEqual(largestWindow, 8, "chunks held at once by the window")
    }
}

/// The short-decimal path of the record renderer writes exactly what `Double.description` does.
final class ShortDecimalTests: XCTestCase {
    func text(_ value: Double) -> String? {
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 64)
        defer { buffer.deallocate() }
        var cursor = LineCursor(buffer)
        guard cursor.putShortDecimal(value) else { return nil }
        return String(decoding: UnsafeBufferPointer(start: buffer, count: cursor.pointer - buffer), as: UTF8.self)
    }

    func testShortDecimalsMatchDescription() {
        var random = SplitMix64(state: 42)
        var handled = 0, checked = 0, mismatches: [String] = []
        func check(_ value: Double) {
            checked += 1
            guard let fast = text(value) else { return }
            handled += 1
            if fast != value.description, mismatches.count < 10 { mismatches.append("\(value.description) written as \(fast)") }
        }
        let fixed: [Double] = [0, 1, -1, 0.1, 0.2, 0.3, 12.25, 1500, 0.0001, 0.00011, 999_999_999_999_999, 1e15 - 0.5,
                               123456.7, 0.1 + 0.2, 1.0 / 3, 2.5e-4, 4503599627370496.5, 3.14159265]
        fixed.forEach { check($0); check(-$0) }
        for _ in 0..<300_000 {
            let integer = Double(random.next() % 10_000_000_000)
            let k = Int(random.next() % 9)
            var scale = 1.0
            for _ in 0..<k { scale *= 10 }
            check(integer / scale)                                   // decimals of up to 8 places
            check(Double(bitPattern: random.next() >> 2 | 0x3F00_0000_0000_0000))  // arbitrary bits
            check(Double(Int64(bitPattern: random.next()) % 1_000_000) * 0.25)
        }
        XCTAssertTrue(mismatches.isEmpty, mismatches.joined(separator: "\n"))
        XCTAssertGreaterThan(handled, checked / 3, "the fast path takes the common decimals")
    }
}

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
