import CLogbook
import CLogbookTestSupport
import Foundation
import LogbookTestKit
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
