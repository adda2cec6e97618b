import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
@testable import LogbookStatistics

/// `LogStatistics` over real bundles: percentiles against exact values computed from what was
/// written, the same statistics however the records were stored (archive files plus ring, or one
/// ring), the CLI's `stats` and `report`, and the report rendered by Chromium.
final class StatisticsTests: XCTestCase {
    /// What one run of `writeWorkload` logged, by call site: the values written, for exact
    /// percentiles.
    struct Written {
        var latencies: [Double] = []
        var sizes: [Int64] = []
        var retries: [UInt64] = []
        var errors = 0
        var records = 0
    }

    /// Three call sites with numeric arguments (a log-normal latency, sizes from 0 to 10 MB,
    /// small retry counts), a string-only site, errors with an attached error; two threads.
    /// Called for every bundle of a comparison, so that its call sites are the same.
    @discardableResult
    func writeWorkload(_ bundle: LogBundle, records: Int, seed: UInt64) throws -> Written {
        let log = try bundle.logger("api")
        let db = try bundle.logger("db")
        var random = SplitMix64(seed: seed)
        var written = Written()
        for i in 0..<records {
            switch i % 5 {
            case 0, 1:
                let latency = exp(random.normal() * 0.8 + 2)  // ms, median e^2 ≈ 7.4
                written.latencies.append(latency)
                log.info("request \(i) took \(latency) ms")
            case 2:
                let size = Int64(random.next() % 10_000_001)
                written.sizes.append(size)
                db.debug("query returned \(size) bytes")
            case 3:
                let retries = UInt64(random.next() % 7)
                written.retries.append(retries)
                db.warning("retry \(retries) for \("shard-\(i % 4)")")
            default:
                if i % 50 == 4 {
                    written.errors += 1
                    log.error("request \(i) failed", error: StatisticsFailure(code: i))
                } else {
                    log.notice("heartbeat from \("node-\(i % 3)")")
                }
            }
            written.records += 1
        }
        return written
    }

    struct StatisticsFailure: Error, CustomStringConvertible {
        let code: Int
        var description: String { "failure \(code)" }
    }

    /// Nearest rank, computed by sorting: the value the histogram must match within its accuracy.
    func exactPercentile(_ sorted: [Double], _ percentile: Double) -> Double {
        // 99.9 / 100 × 20,000 is 19,980.000000000004 in binary: a rank within rounding of a whole
        // number is that number.
        let exactRank = percentile * Double(sorted.count) / 100
        let snapped = abs(exactRank - exactRank.rounded()) < 1e-6 ? exactRank.rounded() : exactRank.rounded(.up)
        let rank = max(1, Int(snapped))
        return sorted[min(rank, sorted.count) - 1]
    }

    func testPercentilesMatchExactValuesOfWhatWasWritten() throws {
        let path = makeTemporaryDirectory(self) + "/stats.logbook"
        let bundle = try LogBundle(path: path, capacity: 8 << 20, chunkSize: 16 << 10)
        let written = try writeWorkload(bundle, records: 50_000, seed: 7)
        try bundle.close()

        let statistics = try LogStatistics(reading: LogReader(path: path))
        XCTAssertEqual(statistics.records, UInt64(written.records))
        XCTAssertTrue(statistics.issues.isEmpty, "\(statistics.issues)")
        func group(_ prefix: String) throws -> LogStatistics.Group {
            try XCTUnwrap(statistics.groups.first { $0.name.hasPrefix(prefix) }, prefix)
        }
        let checks: [(String, Int, [Double])] = [
            ("request {} took", 1, written.latencies), ("query returned", 0, written.sizes.map { Double($0) }),
            ("retry {} for", 0, written.retries.map { Double($0) }),
        ]
        for (prefix, position, values) in checks {
            let site = try group(prefix)
            XCTAssertEqual(site.count, UInt64(prefix.hasPrefix("request {} took") ? written.latencies.count : values.count))
            let argument = try XCTUnwrap(site.arguments.first { $0.position == position }, prefix)
            let sorted = values.sorted()
            XCTAssertEqual(argument.histogram.count, UInt64(values.count), prefix)
            for percentile in [0, 1, 10, 50, 90, 99, 99.9, 100] {
                let exact = exactPercentile(sorted, percentile)
                let measured = try XCTUnwrap(argument.histogram.value(atPercentile: percentile))
                XCTAssertLessThanOrEqual(abs(measured - exact), ValueHistogram.relativeAccuracy * abs(exact) + 1e-12,
                                         "\(prefix) p\(percentile): \(measured) vs exact \(exact)")
            }
        }
        XCTAssertEqual(try group("request {} took").arguments.map(\.label), ["request", "took"])
        XCTAssertEqual(try group("request {} took").arguments.map(\.type), ["int", "double"])
        XCTAssertEqual(try group("query returned").loggers, ["db"])
        // Errors: the failing site, with its first occurrence and the error's text.
        let failed = try XCTUnwrap(statistics.errors.first { $0.template == "request {} failed" })
        XCTAssertEqual(failed.count, UInt64(written.errors))
        XCTAssertTrue(failed.firstMessage.hasPrefix("request 4 failed error="), failed.firstMessage)
        XCTAssertTrue(failed.firstMessage.hasSuffix("StatisticsFailure: failure 4"), failed.firstMessage)
        // The timeline holds every record once.
        let total = statistics.timeline.reduce(UInt64(0)) { $0 + $1.levelCounts.reduce(0, +) }
        XCTAssertEqual(total, statistics.records)
        XCTAssertEqual(statistics.levelCounts[LogLevel.warning.index], UInt64(written.retries.count))
    }

    /// The same records, written once through a small lossless ring whose chunks roll into
    /// archive files, and once into one large ring, give the same statistics (but for the times).
    func testArchivesPlusRingEqualOneRing() throws {
        let directory = makeTemporaryDirectory(self)
        let archived = try LogBundle(path: directory + "/archived.logbook", capacity: 64 << 10, chunkSize: 4 << 10,
                                     wrapPolicy: .lossless, losslessWaitMilliseconds: 60_000,
                                     archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil))
        let single = try LogBundle(path: directory + "/single.logbook", capacity: 32 << 20, chunkSize: 64 << 10)
        for bundle in [archived, single] { try writeWorkload(bundle, records: 20_000, seed: 11) }
        try archived.close()
        try single.close()
        let files = try LogReader(path: directory + "/archived.logbook").archiveFiles()
        XCTAssertGreaterThan(files.files, 3, "the small ring rolled into archive files")

        func comparable(_ s: LogStatistics) -> [String] {
            s.groups.map { g in
                "\(g.name)|\(g.location ?? "")|\(g.function ?? "")|\(g.loggers)|\(g.level ?? "")|\(g.count)|"
                    + g.arguments.map { "\($0.position) \($0.type) \($0.label) \($0.histogram.count)" }.joined(separator: ",")
            } + ["levels \(s.levelCounts) other \(s.otherLevels) records \(s.records)"]
                + s.errors.map { "\($0.template) \($0.level) \($0.count) \($0.firstMessage) \($0.logger)" }
        }
        for grouping in LogStatistics.Grouping.allCases {
            let a = try LogStatistics(reading: LogReader(path: directory + "/archived.logbook"), options: .init(grouping: grouping))
            let b = try LogStatistics(reading: LogReader(path: directory + "/single.logbook"), options: .init(grouping: grouping))
            XCTAssertEqual(comparable(a), comparable(b), "\(grouping)")
            XCTAssertTrue(a.issues.isEmpty && b.issues.isEmpty, "\(a.issues) \(b.issues)")
            // The histograms themselves: equal as values (the same multiset of numbers).
            for (x, y) in zip(a.groups, b.groups) {
                XCTAssertEqual(x.arguments.map(\.histogram), y.arguments.map(\.histogram), x.name)
            }
        }
    }

    /// Filters are applied before counting: --level and --logger.
    func testFiltersNarrowTheStatistics() throws {
        let path = makeTemporaryDirectory(self) + "/stats.logbook"
        let bundle = try LogBundle(path: path, capacity: 8 << 20, chunkSize: 16 << 10)
        let written = try writeWorkload(bundle, records: 5_000, seed: 3)
        try bundle.close()
        let warnings = try LogStatistics(reading: LogReader(path: path), options: .init(filter: .init(minimumLevel: .warning)))
        XCTAssertEqual(warnings.records, UInt64(written.retries.count + written.errors))
        let db = try LogStatistics(reading: LogReader(path: path), options: .init(grouping: .logger, filter: .init(loggers: ["db"])))
        XCTAssertEqual(db.groups.map(\.name), ["db"])
        XCTAssertEqual(db.records, UInt64(written.sizes.count + written.retries.count))
    }

    func testStatsCommandPrintsJSONAndTextAndTheReportRenders() throws {
        let directory = makeTemporaryDirectory(self)
        let path = directory + "/stats.logbook"
        let bundle = try LogBundle(path: path, capacity: 8 << 20, chunkSize: 16 << 10)
        let written = try writeWorkload(bundle, records: 10_000, seed: 5)
        try bundle.close()
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")

        let json = try runProgram(logbook, ["stats", "--json", path])
        XCTAssertEqual(json.status, 0, json.output)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        XCTAssertEqual(object["records"] as? Int, written.records)
        let groups = try XCTUnwrap(object["groups"] as? [[String: Any]])
        let request = try XCTUnwrap(groups.first { ($0["name"] as? String)?.hasPrefix("request {} took") == true })
        let arguments = try XCTUnwrap(request["arguments"] as? [[String: Any]])
        let latency = try XCTUnwrap(arguments.first { $0["label"] as? String == "took" })
        let sorted = written.latencies.sorted()
        let p99 = try XCTUnwrap(latency["p99"] as? Double)
        XCTAssertEqual(p99, exactPercentile(sorted, 99), accuracy: exactPercentile(sorted, 99) * ValueHistogram.relativeAccuracy)
        XCTAssertEqual((object["errors"] as? [[String: Any]])?.count, 1)

        let text = try runProgram(logbook, ["stats", "--by", "logger", path])
        XCTAssertEqual(text.status, 0, text.output)
        XCTAssertTrue(text.output.contains("by logger (2, the most records first):"), text.output)
        let bad = try runProgram(logbook, ["stats", "--by", "thread", path])
        XCTAssertNotEqual(bad.status, 0)
        // Durations reaching before 1677 are refused with a message (they trapped).
        for arguments in [["stats", "--since", "9300000000s", path], ["show", "--until", "300000d", path]] {
            let overflow = try runProgram(logbook, arguments)
            XCTAssertEqual(overflow.status, 64, overflow.output)
            XCTAssertTrue(overflow.output.contains("1677"), overflow.output)
        }
        // The report never replaces what is not a regular file (a FIFO here; /dev/null as root).
        let fifo = directory + "/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let refused = try runProgram(logbook, ["report", path, "-o", fifo])
        XCTAssertNotEqual(refused.status, 0)
        var fifoStat = stat()
        XCTAssertEqual(lstat(fifo, &fifoStat), 0)
        XCTAssertEqual(fifoStat.st_mode & S_IFMT, S_IFIFO, "the FIFO is still there")

        let html = directory + "/report.html"
        let report = try runProgram(logbook, ["report", path, "-o", html, "--title", "Stats <test>"])
        XCTAssertEqual(report.status, 0, report.output)
        let page = try String(contentsOfFile: html, encoding: .utf8)
        XCTAssertTrue(page.contains(#"request <span class="ph">{}</span> took <span class="ph">{}</span> ms"#))
        XCTAssertFalse(page.contains("<test>"), "the title is escaped")
        guard try Chromium.available() else { return }
        let chromium = try Chromium()
        defer { chromium.cleanUp() }
        let run = try chromium.dumpDOM(URL(fileURLWithPath: html))
        XCTAssertEqual(pageProblems(dom: run), [], "the report of a real bundle renders without script errors")
    }
}

extension LogLevel {
    /// Index into ``LogStatistics/levelNames``.
    var index: Int { Int(rawValue) - 1 }
}
