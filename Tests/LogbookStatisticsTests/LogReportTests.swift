import Foundation
import LogbookTestKit
import XCTest
@testable import LogbookStatistics

final class LogReportTests: XCTestCase {
    static let generated: Int64 = 1_715_700_000 * 1_000_000_000

    func render(_ statistics: LogStatistics, title: String = "checkout-service <prod> & \"eu\"") -> String {
        LogReport.html(statistics, title: title, generatedNanoseconds: Self.generated)
    }

    // MARK: Escaping and page hygiene

    /// The tags of a page (name lowercased, raw attribute text), skipping script and style
    /// contents. User text cannot open a tag when escaped: every `<` of it is `&lt;`.
    func tags(of html: String) -> [(name: String, attributes: String)] {
        var result: [(String, String)] = []
        var rest = Substring(html)
        while let open = rest.firstIndex(of: "<") {
            rest = rest[rest.index(after: open)...]
            guard let first = rest.first, first.isLetter || first == "/" || first == "!" else { continue }
            guard let close = rest.firstIndex(of: ">") else { break }
            let inside = rest[..<close]
            rest = rest[rest.index(after: close)...]
            if first == "/" || first == "!" { continue }
            let name = String(inside.prefix { $0.isLetter || $0.isNumber }).lowercased()
            result.append((name, String(inside.dropFirst(name.count))))
            if name == "script" || name == "style", let end = rest.range(of: "</\(name)>", options: .caseInsensitive) {
                rest = rest[end.upperBound...]
            }
        }
        return result
    }

    func testUserTextIsEscapedAndOnlyTheReportsMarkupRemains() {
        let statistics = ReportFixtures.realistic()
        let html = render(statistics)

        // No raw markup from user text.
        for raw in ["<script>alert", "<img", "<style>body", "<a href=\"javascript", "</script><script>alert(5)"] {
            XCTAssertFalse(html.contains(raw), "raw user markup \(raw) in the page")
        }
        XCTAssertTrue(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        XCTAssertTrue(html.contains("&lt;img src=x onerror=alert(2)&gt;"))
        XCTAssertTrue(html.contains("checkout-service &lt;prod&gt; &amp; &quot;eu&quot;"))
        XCTAssertTrue(html.contains("👩‍👩‍👧‍👦🔥"), "emoji kept")
        XCTAssertTrue(html.contains(#"ANSI <span class="ctl">\x1B</span>[31mred"#), "control characters made visible")
        XCTAssertTrue(html.contains("مرحبا"), "right-to-left text kept")

        // The only tags are the report's own: two scripts (error trap first), no external
        // resources, links only to the page's own sections, no event handler attributes.
        let allTags = tags(of: html)
        let allowed: Set<String> = [
            "html", "head", "meta", "title", "script", "style", "body", "header", "div", "h1", "h2", "h3", "p",
            "time", "span", "b", "i", "nav", "a", "main", "section", "ul", "li", "svg", "path", "line", "text",
            "rect", "g", "table", "thead", "tbody", "tr", "th", "td", "code", "bdi", "article", "figure",
            "figcaption", "footer", "pre", "wbr",
        ]
        for tag in allTags {
            XCTAssertTrue(allowed.contains(tag.name), "unexpected tag <\(tag.name)\(tag.attributes)>")
            XCTAssertNil(tag.attributes.range(of: #"\s(on\w+|src|srcset|action|formaction|xlink:href)\s*="#, options: [.regularExpression, .caseInsensitive]),
                         "dangerous attribute in <\(tag.name)\(tag.attributes)>")
            if let href = tag.attributes.range(of: #"href="[^"]*""#, options: .regularExpression) {
                XCTAssertTrue(tag.attributes[href].hasPrefix("href=\"#"), "link out of the page: \(tag.attributes[href])")
            }
        }
        // Elements that must be closed are: what opens, closes (markup was not mangled).
        for name in ["bdi", "span", "td", "tr", "table", "section", "svg", "code", "div", "p", "li", "figure"] {
            XCTAssertEqual(html.components(separatedBy: "<\(name)>").count + html.components(separatedBy: "<\(name) ").count - 2,
                           html.components(separatedBy: "</\(name)>").count - 1, "unbalanced <\(name)>")
        }
        XCTAssertEqual(allTags.filter { $0.name == "script" }.count, 2, "only the error trap and the report's script")
        XCTAssertEqual(html.components(separatedBy: "<script").count - 1, 2)
        XCTAssertEqual(html.lowercased().components(separatedBy: "<script").count - 1, 2)
        XCTAssertEqual(html.lowercased().components(separatedBy: "</script").count - 1, 2)
        let scripts = html.components(separatedBy: "<script>").dropFirst().map { $0.components(separatedBy: "</script>")[0] }
        XCTAssertTrue(scripts[0].contains("window.onerror"), "the first script installs window.onerror")
        XCTAssertTrue(scripts[1].contains("document.body.dataset.ready = \"1\""))

        // URLs only inside the user's own (escaped) text: every occurrence is the user's URL.
        let anyURL = html.components(separatedBy: "http://").count + html.components(separatedBy: "https://").count - 2
        XCTAssertGreaterThan(anyURL, 0, "the fixture's URL should be shown (escaped) in the page")
        XCTAssertEqual(anyURL, html.components(separatedBy: ReportFixtures.userURL).count - 1,
                       "a URL that is not the user's own text")
        XCTAssertTrue(ReportFixtures.userTexts(statistics).contains { $0.contains(ReportFixtures.userURL) })

        // No control characters besides tab and line breaks; U+2028/2029 only outside scripts.
        let controls = html.unicodeScalars.filter {
            ($0.value < 0x20 && ![0x09, 0x0A, 0x0D].contains($0.value)) || (0x7F...0x9F).contains($0.value)
        }
        XCTAssertEqual(controls.count, 0, "control characters: \(controls.map { String($0.value, radix: 16) })")
        for script in scripts {
            XCTAssertFalse(script.contains("\u{2028}") || script.contains("\u{2029}"))
        }
    }

    func testEscapeFunction() {
        XCTAssertEqual(LogReport.escape(#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
        XCTAssertEqual(LogReport.escape("a\u{0}b\u{1B}c\u{7F}d\u{85}e\tf\ng\u{FFFF}", markup: false), #"a\x00b\x1Bc\x7Fd\x85e"# + "\tf\ng\u{FFFD}")
        XCTAssertEqual(LogReport.escape("a\u{1B}"), #"a<span class="ctl">\x1B</span>"#)
        XCTAssertEqual(LogReport.escape("👩‍👩‍👧‍👦👩‍👩‍👧‍👦abc", limit: 2), "👩‍👩‍👧‍👦👩‍👩‍👧‍👦…", "cut between grapheme clusters")
        XCTAssertEqual(LogReport.escape("abc", limit: 3), "abc")
        XCTAssertEqual(LogReport.templateText("a {} <b>"), #"<bdi>a <span class="ph">{}</span> &lt;b&gt;</bdi>"#)
    }

    func testNoNetworkAndSelfContained() {
        let html = render(ReportFixtures.realistic())
        XCTAssertTrue(html.hasPrefix("<!DOCTYPE html>"))
        XCTAssertTrue(html.contains("Content-Security-Policy\" content=\"default-src 'none';"))
        XCTAssertFalse(html.contains("xmlns"), "inline SVG in HTML needs no namespace URL")
        XCTAssertFalse(html.contains("@import") || html.contains("url("), "no external style resources")
    }

    // MARK: Content

    func testHeaderTimelineTablesAndErrors() {
        let statistics = ReportFixtures.realistic()
        let html = render(statistics)
        XCTAssertTrue(html.contains("<time>2024-05-14T09:00:01.234Z</time>"), "first record in RFC 3339")
        XCTAssertTrue(html.contains("<time>2024-05-14T11:59:58.765Z</time>"), "last record in RFC 3339")
        XCTAssertTrue(html.contains(LogReport.count(statistics.records)), "records with separators")
        XCTAssertTrue(html.contains("3 issues while reading the logs"))
        XCTAssertTrue(html.contains("<h2>Records per minute by level</h2>"))
        XCTAssertTrue(html.contains("data-columns=\"180\""))
        for level in LogStatistics.levelNames {
            XCTAssertTrue(html.contains("fill=\"var(--\(level))\""), "bars of \(level)")
        }
        XCTAssertTrue(html.contains("<h2>Top call sites</h2>"))
        XCTAssertTrue(html.contains("10 more not shown."), "60 sites, 50 shown")
        XCTAssertEqual(html.components(separatedBy: "<td class=\"template\">").count - 1, 50 + statistics.errors.count)
        // Arguments: the 20 most frequent sites of the 48 with arguments.
        XCTAssertEqual(html.components(separatedBy: "<article class=\"site\">").count - 1, 20)
        XCTAssertTrue(html.contains("28 more call sites with numeric arguments not shown."))
        XCTAssertTrue(html.contains("<th class=\"num\">p99.9</th>"))
        XCTAssertTrue(html.contains("class=\"marker p50\"") && html.contains("class=\"marker p99\""))
        XCTAssertTrue(html.contains("NaN: 1"), "NaN values of an argument are shown")
        XCTAssertTrue(html.contains("<td class=\"num\">∞</td>"), "an infinite maximum is shown as text")
        XCTAssertTrue(html.contains("<h2>Errors</h2>"))
        XCTAssertEqual(html.components(separatedBy: "<td class=\"message\">").count - 1, statistics.errors.count)
        XCTAssertFalse(html.contains("No errors."))
    }

    func testOtherGroupingsUseTheirHeadings() {
        let byLogger = render(ReportFixtures.realistic(grouping: .logger))
        XCTAssertTrue(byLogger.contains("<h2>Top loggers</h2>"))
        XCTAssertTrue(byLogger.contains("<th>Logger</th><th>Most severe</th>"))
        XCTAssertFalse(groupsSection(byLogger).contains("<th>Template</th>"))
        XCTAssertFalse(byLogger.contains("id=\"arguments\""))
        XCTAssertTrue(byLogger.contains("db&lt;pool&gt;"))

        let byLevel = render(ReportFixtures.realistic(grouping: .level))
        XCTAssertTrue(byLevel.contains("<h2>Records by level</h2>"))
        XCTAssertTrue(byLevel.contains("<th>Level</th><th data-type=\"num\" class=\"num\">Count</th>"))
        XCTAssertFalse(groupsSection(byLevel).contains("<th>Template</th>"))
        XCTAssertTrue(groupsSection(render(ReportFixtures.realistic())).contains("<th>Template</th><th>Location</th><th>Loggers</th><th>Level</th>"))
    }

    /// The groups table's section of a page.
    func groupsSection(_ html: String) -> String {
        html.components(separatedBy: "<section id=\"groups\">").dropFirst().first?.components(separatedBy: "</section>").first ?? ""
    }

    func testEmptyStatistics() {
        let html = render(ReportFixtures.empty)
        XCTAssertTrue(html.contains("No records"))
        XCTAssertTrue(html.contains("No records in the timeline."))
        XCTAssertTrue(html.contains("No errors."))
        XCTAssertTrue(html.contains("var LOGBOOK_TIMELINE = null;"))
        XCTAssertFalse(html.contains("issues while reading"))
    }

    func testDeterministic() {
        let statistics = ReportFixtures.realistic()
        XCTAssertEqual(render(statistics), render(statistics))
        XCTAssertNotEqual(
            LogReport.html(statistics, title: "t", generatedNanoseconds: 0),
            LogReport.html(statistics, title: "t", generatedNanoseconds: 1_000_000_000),
            "the generation time is shown")
    }

    /// Thousands of sites, arguments, errors and issues, long strings: the page stays small.
    func testOutputSizeIsBounded() {
        var statistics = ReportFixtures.realistic()
        let long = String(repeating: "<&> very long template {} ", count: 5_000)
        var histogram = ValueHistogram()
        for value in 0..<100 { histogram.record(Int64(value)) }
        let arguments = (0..<30).map { LogStatistics.ArgumentStatistics(position: $0, type: "int", label: "arg", histogram: histogram) }
        statistics.groups = (0..<2_000).map { index in
            LogStatistics.Group(
                name: long, location: long, function: long, loggers: Array(repeating: long, count: 50), level: "info",
                count: UInt64(10_000 - index), firstNanoseconds: ReportFixtures.start, lastNanoseconds: ReportFixtures.start,
                arguments: arguments)
        }
        statistics.errors = Array(repeating: LogStatistics.ErrorSite(
            template: long, location: long, level: "error", count: 1, firstNanoseconds: 0, firstMessage: long, logger: long),
            count: 5_000)
        statistics.issues = Array(repeating: long, count: 5_000)
        let html = render(statistics)
        XCTAssertLessThan(html.utf8.count, 6_000_000, "page size \(html.utf8.count)")
        XCTAssertTrue(html.contains("1,950 more not shown."))
        XCTAssertTrue(html.contains("4,900 more not shown."), "errors and issues limited")
        XCTAssertTrue(html.contains("22 more arguments not shown."))
        XCTAssertTrue(html.contains("+45 more"), "loggers per site limited")
    }

    /// Odd but possible values: one bucket, a zero bucket width, short level arrays, extreme
    /// timestamps and counts, histograms of one value, of NaN only, of infinities, unknown levels.
    static var degenerate: [LogStatistics] {
        var one = ValueHistogram()
        one.record(42.0)
        var nans = ValueHistogram()
        nans.record(Double.nan)
        var infinite = ValueHistogram()
        infinite.record(-Double.infinity)
        infinite.record(Double.infinity)
        infinite.record(1.0)
        var huge = ValueHistogram()
        huge.record(UInt64.max)
        huge.record(UInt64(1))
        let arguments = [
            LogStatistics.ArgumentStatistics(position: 0, type: "double", label: "one", histogram: one),
            .init(position: 1, type: "double", label: "nan", histogram: nans),
            .init(position: 2, type: "float", label: "inf", histogram: infinite),
            .init(position: 3, type: "uint64", label: "huge", histogram: huge),
            .init(position: 4, type: "int", label: "none", histogram: ValueHistogram()),
        ]
        func site(_ first: Int64, _ last: Int64, count: UInt64 = .max) -> LogStatistics.Group {
            .init(name: "", location: nil, function: nil, loggers: [], level: "FATAL", count: count,
                  firstNanoseconds: first, lastNanoseconds: last, arguments: arguments)
        }
        let error = LogStatistics.ErrorSite(template: "", location: nil, level: "weird", count: 0, firstNanoseconds: .min,
                                            firstMessage: "", logger: "")
        return [
            LogStatistics(
                grouping: .site, records: 1, firstNanoseconds: 5, lastNanoseconds: 5, levelCounts: [0, 0, 1],
                otherLevels: 0, bucketNanoseconds: 0, timeline: [.init(startNanoseconds: 0, levelCounts: [0, 0, 1])],
                groups: [site(5, 5, count: 1)], errors: [error], issues: [""]),
            LogStatistics(
                grouping: .site, records: .max, firstNanoseconds: .min, lastNanoseconds: .max,
                levelCounts: Array(repeating: .max, count: 7), otherLevels: .max, bucketNanoseconds: 1,
                timeline: [.init(startNanoseconds: .min, levelCounts: [.max]), .init(startNanoseconds: .max, levelCounts: [.max, .max])],
                groups: [site(.min, .max)], errors: [error], issues: []),
            LogStatistics(
                grouping: .level, records: 10, firstNanoseconds: 0, lastNanoseconds: 999_999_999, levelCounts: [],
                otherLevels: 10, bucketNanoseconds: 100_000_000,
                timeline: (0..<10).map { .init(startNanoseconds: Int64($0) * 100_000_000, levelCounts: []) },
                groups: [], errors: [], issues: []),
        ]
    }

    func testDegenerateInputsRender() {
        for statistics in Self.degenerate {
            let html = render(statistics)
            XCTAssertTrue(html.hasSuffix("</html>\n"))
            XCTAssertEqual(html.components(separatedBy: "<script>").count - 1, 2)
        }
    }

    func testDegenerateInputsRunInChromium() throws {
        guard try Chromium.available() else { return }
        let chromium = try Chromium()
        defer { chromium.cleanUp() }
        for (index, statistics) in Self.degenerate.enumerated() {
            let (problems, run) = try renderInChromium(render(statistics), name: "degenerate\(index).html", chromium: chromium)
            XCTAssertEqual(problems, [], "case \(index); stderr: \(run.stderr.suffix(1_000))")
        }
    }

    // MARK: Timeline downsampling and labels

    func testDownsamplingSumsAdjacentBuckets() throws {
        let minute = ReportFixtures.minute
        func buckets(_ count: Int, from start: Int64) -> [LogStatistics.TimeBucket] {
            (0..<count).map { index in
                LogStatistics.TimeBucket(startNanoseconds: start + Int64(index) * minute, levelCounts: [1, 2, 3, 4, 5, 6, UInt64(index % 2)])
            }
        }
        func assertSumsKept(_ timeline: LogReport.DownsampledTimeline, _ buckets: [LogStatistics.TimeBucket], line: UInt = #line) {
            for level in 0..<7 {
                XCTAssertEqual(timeline.columns.map { $0.levelCounts[level] }.reduce(0, +),
                               buckets.map { $0.levelCounts[level] }.reduce(0, +), line: line)
            }
        }

        // 3 hours: one column per bucket.
        let hours = buckets(180, from: ReportFixtures.start)
        let small = try XCTUnwrap(LogReport.downsample(hours, bucketNanoseconds: minute, maxColumns: 600))
        XCTAssertEqual(small.bucketsPerColumn, 1)
        XCTAssertEqual(small.columns.count, 180)
        XCTAssertEqual(small.columns.map(\.levelCounts), hours.map(\.levelCounts))

        // A week: 17 would do, 20 is the next round factor; columns start at :00, :20, :40.
        let week = buckets(10_001, from: ReportFixtures.start)
        let large = try XCTUnwrap(LogReport.downsample(week, bucketNanoseconds: minute, maxColumns: 600))
        XCTAssertEqual(large.bucketsPerColumn, 20)
        XCTAssertEqual(large.columnNanoseconds, 20 * minute)
        XCTAssertEqual(large.columns.count, 501)
        assertSumsKept(large, week)
        XCTAssertEqual(large.columns[1].startNanoseconds, ReportFixtures.start + 20 * minute)
        XCTAssertEqual(large.columns.last!.levelCounts[0], 1, "the last column holds the one bucket left")
        XCTAssertEqual(large.firstNanoseconds, ReportFixtures.start)
        XCTAssertEqual(large.endNanoseconds, ReportFixtures.start + 10_001 * minute)

        // Not aligned: the first column is partial, columns start on even minutes.
        let shifted = buckets(1_000, from: ReportFixtures.start + 7 * minute)
        let aligned = try XCTUnwrap(LogReport.downsample(shifted, bucketNanoseconds: minute, maxColumns: 600))
        XCTAssertEqual(aligned.bucketsPerColumn, 2)
        XCTAssertEqual(aligned.columns.count, 501)
        XCTAssertEqual(aligned.columns[0].startNanoseconds, ReportFixtures.start + 6 * minute)
        XCTAssertEqual(aligned.columns[0].levelCounts[1], 2, "one bucket in the first column")
        assertSumsKept(aligned, shifted)

        // Buckets far apart (not consecutive): the column count stays bounded.
        let apart = [hours[0], LogStatistics.TimeBucket(startNanoseconds: ReportFixtures.start + 400 * 86_400_000_000_000, levelCounts: [9, 9, 9, 9, 9, 9, 9])]
        let sparse = try XCTUnwrap(LogReport.downsample(apart, bucketNanoseconds: minute, maxColumns: 600))
        XCTAssertLessThanOrEqual(sparse.columns.count, 600)
        assertSumsKept(sparse, apart)
        XCTAssertNil(LogReport.downsample([], bucketNanoseconds: minute, maxColumns: 600))

        var statistics = ReportFixtures.realistic()
        statistics.timeline = week
        let html = render(statistics)
        XCTAssertTrue(html.contains("data-columns=\"501\""))
        XCTAssertTrue(html.contains("<h2>Records per 20 minutes by level</h2>"))
        XCTAssertTrue(html.contains("10,001 buckets of 1 min, summed 20 by 20 into 501 bars"))
    }

    func testBucketWidthWording() {
        XCTAssertEqual(LogReport.perWidth(nanoseconds: 60_000_000_000), "minute")
        XCTAssertEqual(LogReport.perWidth(nanoseconds: 300_000_000_000), "5 minutes")
        XCTAssertEqual(LogReport.perWidth(nanoseconds: 3_600_000_000_000), "hour")
        XCTAssertEqual(LogReport.perWidth(nanoseconds: 90_000_000_000), "90 seconds")
        XCTAssertEqual(LogReport.perWidth(nanoseconds: 250_000_000), "250 milliseconds")
        var statistics = ReportFixtures.realistic()
        statistics.bucketNanoseconds = 300_000_000_000
        XCTAssertTrue(render(statistics).contains("<h2>Records per 5 minutes by level</h2>"))
    }

    func testTimeAxisLabelsAreUTCAndDoNotCrowd() {
        let html = render(ReportFixtures.realistic())
        // 3 hours over ~1100 px: ticks every 30 minutes, labelled hh:mm, the date once.
        for label in ["09:30", "10:00", "10:30", "11:00", "11:30", "12:00"] {
            XCTAssertTrue(html.contains(">\(label)</text>"), "time label \(label)")
        }
        XCTAssertFalse(html.contains(">09:15</text>"))
        XCTAssertEqual(html.components(separatedBy: ">2024-05-14</text>").count - 1, 2, "date under the first label of each chart")
    }

    // MARK: Formatting

    func testNumberFormatting() {
        XCTAssertEqual(LogReport.count(UInt64(0)), "0")
        XCTAssertEqual(LogReport.count(UInt64(1_234_567)), "1,234,567")
        XCTAssertEqual(LogReport.count(UInt64.max), "18,446,744,073,709,551,615")
        XCTAssertTrue(LogReport.isIntegerType("int"))
        XCTAssertTrue(LogReport.isIntegerType("uint8"))
        XCTAssertTrue(LogReport.isIntegerType("Int64"))
        XCTAssertTrue(LogReport.isIntegerType("uint32"))
        XCTAssertFalse(LogReport.isIntegerType("double"))
        XCTAssertFalse(LogReport.isIntegerType("interval"))
        XCTAssertFalse(LogReport.isIntegerType("float"))
        XCTAssertEqual(LogReport.value(1023.7, integer: true), "1,024")
        XCTAssertEqual(LogReport.value(-5, integer: true), "-5")
        XCTAssertEqual(LogReport.value(1.8e19, integer: true), "1.8e19")
        XCTAssertEqual(LogReport.value(12.3456, integer: false), "12.35")
        XCTAssertEqual(LogReport.value(0.012345, integer: false), "0.01235")
        XCTAssertEqual(LogReport.value(1234.5, integer: false), "1,235")
        XCTAssertEqual(LogReport.value(123_456.7, integer: false), "123,457")
        XCTAssertEqual(LogReport.value(0.000012345, integer: false), "1.235e-5")
        XCTAssertEqual(LogReport.value(9.99996, integer: false), "10")
        XCTAssertEqual(LogReport.value(2, integer: false), "2")
        XCTAssertEqual(LogReport.value(-0.5, integer: false), "-0.5")
        XCTAssertEqual(LogReport.value(.infinity, integer: false), "∞")
        XCTAssertEqual(LogReport.value(-.infinity, integer: true), "-∞")
        XCTAssertEqual(LogReport.value(.nan, integer: false), "NaN")
        XCTAssertEqual(LogReport.compact(1_500, integer: true), "1.5k")
        XCTAssertEqual(LogReport.compact(20_000_000, integer: true), "20M")
        XCTAssertEqual(LogReport.compact(250, integer: true), "250")
        XCTAssertEqual(LogReport.percent(1, of: 3), "33.3%")
        XCTAssertEqual(LogReport.percent(1, of: 100_000), "<0.1%")
        XCTAssertEqual(LogReport.percent(0, of: 0), "–")
        XCTAssertEqual(LogReport.duration(nanoseconds: 350_000_000), "350 ms")
        XCTAssertEqual(LogReport.duration(nanoseconds: 10_797_530_864_210), "2 h 59 min")
        XCTAssertEqual(LogReport.duration(nanoseconds: 2 * 86_400_000_000_000 + 3_600_000_000_000), "2 d 1 h")
        XCTAssertEqual(LogReport.duration(nanoseconds: 60_000_000_000), "1 min")
        XCTAssertEqual(LogReport.duration(nanoseconds: 3_600_000_000_000), "1 h")
    }

    func testRFC3339() {
        XCTAssertEqual(LogReport.rfc3339(0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(LogReport.rfc3339(ReportFixtures.start), "2024-05-14T09:00:00.000Z")
        XCTAssertEqual(LogReport.rfc3339(-1), "1969-12-31T23:59:59.999Z")
        XCTAssertEqual(LogReport.rfc3339(951_782_400_000_000_000 + 999_999_999, fractionDigits: 9), "2000-02-29T00:00:00.999999999Z")
        XCTAssertEqual(LogReport.rfc3339(4_102_444_799_000_000_000), "2099-12-31T23:59:59.000Z")
    }

    // MARK: Chromium

    /// Renders `html` in Chromium and returns the problems `pageProblems` finds, and the run.
    func renderInChromium(_ html: String, name: String, chromium: Chromium) throws -> ([String], Chromium.Run) {
        let page = try chromium.write(html, name: name)
        let run = try chromium.dumpDOM(page)
        return (pageProblems(dom: run), run)
    }

    func testReportRunsInChromiumWithoutScriptErrors() throws {
        guard try Chromium.available() else { return }
        let chromium = try Chromium()
        defer { chromium.cleanUp() }
        let html = render(ReportFixtures.realistic())
        let (problems, run) = try renderInChromium(html, name: "report.html", chromium: chromium)
        XCTAssertEqual(problems, [], "stderr: \(run.stderr.suffix(2_000))")
        print("Chromium --dump-dom took \(String(format: "%.2f", run.seconds)) s")
        // The scripts did their work: tooltip added, headings made sortable.
        XCTAssertTrue(run.stdout.contains("id=\"tooltip\""))
        XCTAssertTrue(run.stdout.contains("tabindex=\"0\""))
        XCTAssertFalse(run.stdout.contains("<img"), "no element from user text")

        let png = chromium.directory.appendingPathComponent("report.png")
        let shot = try chromium.screenshot(try chromium.write(html, name: "report-shot.html"), to: png)
        print("Chromium --screenshot took \(String(format: "%.2f", shot.seconds)) s")
        XCTAssertFalse(shot.timedOut)
        let data = try Data(contentsOf: png)
        XCTAssertEqual(Array(data.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "PNG signature")
        XCTAssertGreaterThan(data.count, 20_000, "a screenshot of a full page is more than a few KB")
        // Keep the page and its screenshot when asked to (to look at them).
        if let keep = ProcessInfo.processInfo.environment["LOGBOOK_REPORT_OUTPUT_DIR"] {
            let directory = URL(fileURLWithPath: keep, isDirectory: true)
            try Data(html.utf8).write(to: directory.appendingPathComponent("report.html"))
            try data.write(to: directory.appendingPathComponent("report.png"))
        }
    }

    func testEmptyReportRunsInChromiumWithoutScriptErrors() throws {
        guard try Chromium.available() else { return }
        let chromium = try Chromium()
        defer { chromium.cleanUp() }
        let (problems, run) = try renderInChromium(render(ReportFixtures.empty), name: "empty.html", chromium: chromium)
        XCTAssertEqual(problems, [], "stderr: \(run.stderr.suffix(2_000))")
    }

    /// The scripts really work: a mouse move over the timeline shows the column's tooltip, a
    /// click on a heading sorts the table (driven by a script run after the page's load).
    func testTooltipAndSortingWorkInChromium() throws {
        guard try Chromium.available() else { return }
        let chromium = try Chromium()
        defer { chromium.cleanUp() }
        let driver = #"""
            window.addEventListener("load", function () {
              var svg = document.querySelector("svg.timeline"), box = svg.getBoundingClientRect();
              var left = parseFloat(svg.getAttribute("data-plot-left")), width = parseFloat(svg.getAttribute("data-plot-width"));
              var columns = parseInt(svg.getAttribute("data-columns"), 10);
              var x = box.left + box.width * (left + 100.5 * width / columns) / 1200, y = box.top + box.height / 2;
              svg.dispatchEvent(new MouseEvent("mousemove", { clientX: x, clientY: y, bubbles: true }));
              var tip = document.getElementById("tooltip");
              document.body.setAttribute("data-test-tooltip", tip.hidden ? "hidden" : tip.textContent);
              var heading = document.querySelector("#groups th:nth-child(2)");
              heading.click();
              var first = document.querySelector("#groups tbody td.template").textContent;
              document.body.setAttribute("data-test-sorted", heading.getAttribute("aria-sort") + "|" + first.slice(0, 12));
            });
            """#
        let html = LogReport.render(ReportFixtures.realistic(), title: "t", generatedNanoseconds: 0, extraScript: driver)
        let (problems, run) = try renderInChromium(html, name: "driven.html", chromium: chromium)
        XCTAssertEqual(problems, [])
        // Column 100 is 10:40 UTC, in the burst of errors.
        XCTAssertTrue(run.stdout.contains(#"data-test-tooltip="2024-05-14 10:40:00 – 10:41:00 UTC"#), String(run.stdout.prefix(600)))
        XCTAssertNotNil(run.stdout.range(of: #"data-test-tooltip="[^"]*error[0-9,]+[^"]*total[0-9,]+""#, options: .regularExpression))
        XCTAssertTrue(run.stdout.contains(#"data-test-sorted="ascending|&lt;!-- comment""#), String(run.stdout.prefix(600)))
    }

    /// Writes sample pages to look at when LOGBOOK_REPORT_OUTPUT_DIR is set (skipped otherwise).
    func testWriteSamplePagesWhenAsked() throws {
        guard let keep = ProcessInfo.processInfo.environment["LOGBOOK_REPORT_OUTPUT_DIR"] else {
            throw XCTSkip("set LOGBOOK_REPORT_OUTPUT_DIR to write sample pages")
        }
        let directory = URL(fileURLWithPath: keep, isDirectory: true)
        var week = ReportFixtures.realistic()
        week.timeline = (0..<10_080).map { index in
            let hour = Double(index % 1_440) / 60
            let daily = 1 + 0.8 * sin((hour - 8) / 24 * 2 * .pi)
            return LogStatistics.TimeBucket(
                startNanoseconds: ReportFixtures.start + Int64(index) * ReportFixtures.minute,
                levelCounts: [0, UInt64(40 * daily), UInt64(300 * daily), 2, UInt64(index % 97 == 0 ? 30 : 3),
                              UInt64((4_000..<4_090).contains(index) ? 150 : index % 13 == 0 ? 1 : 0), 0])
        }
        week.lastNanoseconds = ReportFixtures.start + 10_080 * ReportFixtures.minute - 1
        let pages = [
            ("empty.html", render(ReportFixtures.empty, title: "")),
            ("week.html", render(week, title: "A week of logs")),
            ("loggers.html", render(ReportFixtures.realistic(grouping: .logger), title: "By logger")),
            ("levels.html", render(ReportFixtures.realistic(grouping: .level), title: "By level")),
        ]
        let degenerate = Self.degenerate.enumerated().map { ("degenerate\($0.offset).html", render($0.element, title: "Degenerate \($0.offset)")) }
        for (name, html) in pages + degenerate { try Data(html.utf8).write(to: directory.appendingPathComponent(name)) }
    }

    /// The checks above can fail: a script that throws, one that does not parse, a page whose
    /// scripts never finish are all reported.
    func testBrokenScriptsAreCaught() throws {
        guard try Chromium.available() else { return }
        let chromium = try Chromium()
        defer { chromium.cleanUp() }
        let statistics = ReportFixtures.realistic()

        // The report's own error trap reports a throwing script and a syntax error.
        let throwing = LogReport.render(
            statistics, title: "t", generatedNanoseconds: 0, extraScript: "null.deliberateFailure();")
        let (thrown, _) = try renderInChromium(throwing, name: "throwing.html", chromium: chromium)
        XCTAssertEqual(thrown.count, 1, "\(thrown)")
        XCTAssertTrue(thrown.first?.contains("deliberateFailure") == true, "\(thrown)")

        let unparsable = LogReport.render(
            statistics, title: "t", generatedNanoseconds: 0, extraScript: "this is not JavaScript(")
        let (syntax, _) = try renderInChromium(unparsable, name: "syntax.html", chromium: chromium)
        XCTAssertTrue(syntax.first?.contains("script errors: ") == true && syntax.first?.contains("SyntaxError") == true, "\(syntax)")

        // A hand-written page whose only script throws before marking the page ready.
        let handWritten = """
            <!DOCTYPE html><html><body><pre id="script-errors"></pre>
            <script>throw new Error("boom"); document.body.dataset.ready = "1";</script></body></html>
            """
        let (notReady, _) = try renderInChromium(handWritten, name: "hand.html", chromium: chromium)
        XCTAssertEqual(notReady, ["the page's scripts did not finish: no data-ready=\"1\" on <body>"])
    }
}
