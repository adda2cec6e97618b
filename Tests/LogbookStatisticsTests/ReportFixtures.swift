import Foundation
@testable import LogbookStatistics
import LogbookTestKit

/// Statistics built by hand for the report's tests.
enum ReportFixtures {
    /// 2024-05-14T09:00:00Z.
    static let start: Int64 = 1_715_677_200 * 1_000_000_000
    static let minute: Int64 = 60_000_000_000
    /// A URL inside user text: the only one the page may contain.
    static let userURL = "https://evil.example/x.js"

    /// Hostile pieces of user text: markup, entities, quotes, control characters, bidi
    /// controls, right-to-left text, emoji, a URL.
    static let hostile = [
        #"<script>alert(1)</script> {} & "x""#,
        #"</td></tr></table><img src=x onerror=alert(2)> {} ms"#,
        "payment {} failed: 'quoted' \"double\" &amp; &lt;b&gt; \(userURL)",
        "ANSI \u{1B}[31mred\u{1B}[0m NUL\u{0} bell\u{7} del\u{7F} c1\u{85} took {} ms",
        "مرحبا {} שלום \u{202E}override\u{202C} mixed direction",
        "emoji 👩‍👩‍👧‍👦🔥 cache {} hit ratio {}",
        "<!-- comment --> ]]> <![CDATA[ x ]]> {}",
        "<style>body{display:none}</style> queue depth {}",
        "javascript:alert(3) <a href=\"javascript:alert(4)\">link</a> {}",
        "\u{2028}line separator\u{2029} {} </script><script>alert(5)</script>",
    ]

    /// A deterministic generator (64-bit LCG), so that fixtures are the same on every run.
    struct Random {
        var state: UInt64
        mutating func next() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(1 << 53)
        }
        /// Log-normal around `median`.
        mutating func logNormal(median: Double, sigma: Double) -> Double {
            let u1 = max(next(), 1e-12), u2 = next()
            let normal = (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
            return median * exp(sigma * normal)
        }
    }

    /// Three hours of 60 s buckets with a burst of errors around 10:35, 60 call sites with
    /// hostile templates, double and integer arguments, errors and issues.
    static func realistic(grouping: LogStatistics.Grouping = .site) -> LogStatistics {
        var random = Random(state: 42)
        // Timeline: a daily-ish wave of info, steady debug, a little trace, and the burst.
        var timeline: [LogStatistics.TimeBucket] = []
        for index in 0..<180 {
            let wave = 1 + 0.35 * sin(Double(index) / 180 * 2 * .pi)
            let burst = (95..<108).contains(index)
            let counts: [UInt64] = [
                UInt64(40 * random.next()),
                UInt64(120 * wave + 30 * random.next()),
                UInt64(420 * wave + 80 * random.next()),
                UInt64(12 * random.next()),
                UInt64((burst ? 60 : 6) * random.next()),
                burst ? UInt64(80 + 120 * random.next()) : (random.next() < 0.2 ? 1 : 0),
                burst && index % 3 == 0 ? UInt64(1 + 6 * random.next()) : 0,
            ]
            timeline.append(.init(startNanoseconds: start + Int64(index) * minute, levelCounts: counts))
        }
        var levelCounts = [UInt64](repeating: 0, count: 7)
        for bucket in timeline {
            for level in 0..<7 { levelCounts[level] += bucket.levelCounts[level] }
        }
        let records = levelCounts.reduce(0, +)
        let first = start + 1_234_567_890
        let last = start + 179 * minute + 58_765_432_100

        // Sites: Zipf-like counts, hostile templates, arguments of several types.
        var groups: [LogStatistics.Group] = []
        let loggers = ["api.http", "db<pool>", "payments & billing", "worker \"7\"", "cache", "auth", "scheduler"]
        let levels = ["info", "debug", "warning", "error", "notice", "trace", "critical"]
        for index in 0..<60 {
            let count = UInt64(Double(records) * 0.22 / pow(Double(index + 1), 1.05)) + 3
            let template = index < hostile.count
                ? hostile[index]
                : ["request {} took {} ms", "GET {} -> {} in {} µs", "flushed {} bytes to {}", "retry {} of {} after {} s"][index % 4]
                    + " (site \(index))"
            var arguments: [LogStatistics.ArgumentStatistics] = []
            if index % 5 != 4 {
                var latency = ValueHistogram()
                for _ in 0..<400 { latency.record(random.logNormal(median: 12 + Double(index), sigma: 1.1)) }
                if index == 0 { latency.record(Double.nan); latency.record(Double.infinity) }
                arguments.append(.init(position: 0, type: "double", label: "took", histogram: latency))
                var bytes = ValueHistogram()
                for _ in 0..<400 { bytes.record(Int64(random.logNormal(median: 4_096, sigma: 1.6))) }
                arguments.append(.init(position: 1, type: "int64", label: "flushed <b>&</b>", histogram: bytes))
                if index % 3 == 0 {
                    var status = ValueHistogram()
                    for _ in 0..<300 { status.record(UInt64([200, 200, 200, 201, 204, 304, 404, 500][Int(random.next() * 8)])) }
                    arguments.append(.init(position: 2, type: "uint16", label: "", histogram: status))
                    var delta = ValueHistogram()
                    for _ in 0..<300 { delta.record(Int64((random.next() - 0.5) * 2_000)) }
                    arguments.append(.init(position: 3, type: "int", label: "delta", histogram: delta))
                }
            }
            groups.append(.init(
                name: template,
                location: "Sources/App/\(index % 2 == 0 ? "Handlers" : "<Jobs>")/File\(index).swift:\(100 + index * 7)",
                function: index % 3 == 0 ? "handle(_:context:) \u{202E}rtl" : "run()",
                loggers: index == 0 ? loggers : [loggers[index % loggers.count]],
                level: levels[index % levels.count],
                count: count,
                firstNanoseconds: first + Int64(index) * 7_000_000_000,
                lastNanoseconds: last - Int64(index) * 11_000_000_000,
                arguments: arguments))
        }
        groups.sort { $0.count > $1.count }

        var errors: [LogStatistics.ErrorSite] = []
        for index in 0..<8 {
            errors.append(.init(
                template: hostile[index % hostile.count],
                location: "Sources/App/Payments.swift:\(40 + index)",
                level: index % 4 == 3 ? "critical" : "error",
                count: UInt64(500 / (index + 1)),
                firstNanoseconds: start + 95 * minute + Int64(index) * 1_500_000_000,
                firstMessage: "payment 42 failed: <script>alert('msg')</script> & more\n  error: Timeout(\"\(userURL)\")\n    at Payments.swift:41\n    at Server.swift:1200",
                logger: loggers[index % loggers.count]))
        }

        let statistics = LogStatistics(
            grouping: .site, records: records, firstNanoseconds: first, lastNanoseconds: last,
            levelCounts: levelCounts, otherLevels: 0, bucketNanoseconds: minute, timeline: timeline,
            groups: groups, errors: errors,
            issues: [
                "app.2.log: 3 records lost (ring buffer full at 10:36:12)",
                "app.3.log: truncated frame at offset 1048576: <script>alert('issue')</script> & \(userURL)",
                "archive 2024-05-14.lbz: checksum mismatch in block 7 \u{1B}[1m",
            ])
        return regrouped(statistics, by: grouping)
    }

    /// `statistics` with its groups replaced by per-logger or per-level ones (no arguments).
    static func regrouped(_ statistics: LogStatistics, by grouping: LogStatistics.Grouping) -> LogStatistics {
        guard grouping != .site else { return statistics }
        var copy = statistics
        copy.grouping = grouping
        switch grouping {
        case .site:
            break
        case .logger:
            copy.groups = ["api.http", "db<pool>", "payments & billing", "worker \"7\""].enumerated().map { index, name in
                LogStatistics.Group(
                    name: name, location: nil, function: nil, loggers: [], level: ["info", "error", "critical", "warning"][index],
                    count: statistics.records / UInt64(2 << index), firstNanoseconds: statistics.firstNanoseconds!,
                    lastNanoseconds: statistics.lastNanoseconds!, arguments: [])
            }
        case .level:
            copy.groups = LogStatistics.levelNames.enumerated().map { index, name in
                LogStatistics.Group(
                    name: name, location: nil, function: nil, loggers: [], level: nil, count: statistics.levelCounts[index],
                    firstNanoseconds: statistics.firstNanoseconds!, lastNanoseconds: statistics.lastNanoseconds!, arguments: [])
            }.sorted { $0.count > $1.count }
        }
        return copy
    }

    /// No records at all.
    static let empty = LogStatistics(
        grouping: .site, records: 0, firstNanoseconds: nil, lastNanoseconds: nil,
        levelCounts: [0, 0, 0, 0, 0, 0, 0], otherLevels: 0, bucketNanoseconds: minute, timeline: [],
        groups: [], errors: [], issues: [])

    /// Every piece of user text of `statistics` (to check that only these may hold URLs).
    static func userTexts(_ statistics: LogStatistics) -> [String] {
        var texts = statistics.issues
        for group in statistics.groups {
            texts += [group.name] + group.loggers + [group.location, group.function, group.level].compactMap { $0 }
            texts += group.arguments.flatMap { [$0.label, $0.type] }
        }
        for error in statistics.errors {
            texts += [error.template, error.level, error.firstMessage, error.logger] + [error.location].compactMap { $0 }
        }
        return texts
    }
}
