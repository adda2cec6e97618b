import ArgumentParser
import Foundation
import Logbook
import LogbookStatistics

/// `logbook stats`: counts, rates and times per call site (or logger, or level), percentiles of
/// every numeric argument, records per level over time, and the errors.
struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Count records per call site, logger or level; percentiles of every numeric argument; records per level over time; errors.")

    @Argument(help: bundleArgumentHelp)
    var bundle: String

    @Option(help: "Group by: site (the default), logger or level.")
    var by: String = "site"

    @OptionGroup var selection: RecordSelection

    @Flag(help: "One JSON object (for scripts).")
    var json = false

    @Option(help: "Groups to print as text (the most records first); --json prints all.")
    var top: Int = 20

    @Option(name: .customLong("metadata"), help: ArgumentHelp("Percentiles of this metadata key's numeric values per group, as for arguments (a string that is a number counts: swift-log's metadata). Repeatable.", valueName: "key"))
    var metadataKeys: [String] = []

    func validate() throws {
        guard LogStatistics.Grouping(rawValue: by) != nil else {
            throw ValidationError("--by takes site, logger or level, not '\(escapingControlCharacters(by))'")
        }
        guard top > 0 else { throw ValidationError("--top takes a positive number") }
    }

    func run() throws {
        let statistics = try readStatistics(bundle, grouping: LogStatistics.Grouping(rawValue: by)!, selection: selection,
                                            metadataKeys: metadataKeys)
        var output = Output()
        if json {
            output.line(StatisticsJSON.render(statistics))
        } else {
            for line in StatisticsText.render(statistics, bundle: bundle, top: top) { output.line(escapingControlCharacters(line)) }
        }
        output.flush()
        if !statistics.issues.isEmpty {
            warn("\(statistics.issues.count) problems in \(bundle); run `logbook verify \(bundle)`")
        }
    }
}

/// `logbook report`: the statistics as one self-contained HTML page.
struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an HTML report: records per minute by level, top call sites, percentiles and histograms of numeric arguments, errors.")

    @Argument(help: bundleArgumentHelp)
    var bundle: String

    @Option(name: [.short, .long], help: "The HTML file to write.")
    var output: String

    @Option(help: "The page's title (default: the bundle's name).")
    var title: String?

    @OptionGroup var selection: RecordSelection

    func run() throws {
        let statistics = try readStatistics(bundle, grouping: .site, selection: selection)
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let page = LogReport.html(
            statistics, title: title ?? URL(fileURLWithPath: bundle).lastPathComponent,
            generatedNanoseconds: Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec))
        do {
            try writeFileAtomically(output, Array(page.utf8))
        } catch {
            fail("cannot write \(output): \(error)")
        }
        say("wrote \(output): \(statistics.records) records, \(statistics.groups.count) call sites, \(statistics.errors.count) error sites")
        if !statistics.issues.isEmpty {
            warn("\(statistics.issues.count) problems in \(bundle) (listed in the report); run `logbook verify \(bundle)`")
        }
    }
}

func readStatistics(_ bundle: String, grouping: LogStatistics.Grouping, selection: RecordSelection, metadataKeys: [String] = []) throws
    -> LogStatistics
{
    let filter = try selection.filter()
    let reader: LogReader
    do { reader = try LogReader(path: bundle) } catch { fail("\(error)") }
    do {
        var statistics = try LogStatistics(reading: reader, options: .init(grouping: grouping, filter: filter, metadataKeys: metadataKeys))
        // What is missing is part of the answer: verify's findings become issues too.
        if let summary = try? reader.verify(), summary.recordsLost > 0 {
            statistics.issues.append("\(summary.recordsLost) records the bundle counted are missing")
        }
        let known = Set(statistics.issues)
        statistics.issues += reader.issues.filter { $0.isFailure }.map(\.description).filter { !known.contains($0) }
        return statistics
    } catch {
        fail("\(error)")
    }
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`: a reader of the
/// report never sees half of it. A symlink at `path` is replaced, not followed; anything else that
/// is not a regular file (a device such as /dev/null, a FIFO, a socket, a directory) is refused.
func writeFileAtomically(_ path: String, _ bytes: [UInt8]) throws(LogbookError) {
    var existing = stat()
    if lstat(path, &existing) == 0 {
        let type = existing.st_mode & S_IFMT
        guard type == S_IFREG || type == S_IFLNK else {
            throw LogbookError(subject: .file, operation: "rename", path: path, errno: EEXIST,
                               detail: "refusing to replace a file that is not a regular file")
        }
    }
    let temporary = path + ".tmp-\(getpid())"
    let fd = try systemCall(.file, "open", path: temporary) { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644) }
    do throws(LogbookError) {
        do throws(LogbookError) {
            var offset = 0
            while offset < bytes.count {
                let n = try systemCall(.file, "write", path: temporary) {
                    bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
                }
                offset += n
            }
            try systemCall(.file, "fsync", path: temporary) { fsync(fd) }
        } catch {
            close(fd)
            throw error
        }
        // Never retried: Linux releases the descriptor even when close fails, with EINTR too.
        if close(fd) != 0 { throw LogbookError(subject: .file, operation: "close", path: temporary, errno: errno) }
        try systemCall(.file, "rename", path: path) { rename(temporary, path) }
    } catch {
        unlink(temporary)
        throw error
    }
}

/// The text of `logbook stats`.
enum StatisticsText {
    static func render(_ s: LogStatistics, bundle: String, top: Int) -> [String] {
        var lines: [String] = []
        guard let first = s.firstNanoseconds, let last = s.lastNanoseconds else {
            return ["\(bundle): no records"] + s.issues.map { "issue: \($0)" }
        }
        let seconds = (Double(last) - Double(first)) / 1e9
        lines.append("\(bundle): \(grouped(s.records)) records from \(formatRFC3339(nanoseconds: first)) to \(formatRFC3339(nanoseconds: last)) (\(duration(seconds)))")
        let levels = zip(LogStatistics.levelNames, s.levelCounts).filter { $0.1 > 0 }.map { "\($0.0) \(grouped($0.1))" }
        lines.append("levels: " + (levels + (s.otherLevels > 0 ? ["other \(grouped(s.otherLevels))"] : [])).joined(separator: ", "))
        lines.append("")
        lines.append("by \(s.grouping.rawValue) (\(s.groups.count), the most records first):")
        for group in s.groups.prefix(top) {
            let rate = group.rate(over: s)
            var head = "\(pad(grouped(group.count), 12))  \(pad(number(rate) + "/s", 10))  \(pad(group.level ?? "", 8))  \(group.name)"
            if let location = group.location { head += "  (\(location))" }
            lines.append(head)
            var detail = "              first \(formatRFC3339(nanoseconds: group.firstNanoseconds))  last \(formatRFC3339(nanoseconds: group.lastNanoseconds))"
            if !group.loggers.isEmpty { detail += "  loggers " + group.loggers.joined(separator: ", ") }
            lines.append(detail)
            for argument in group.arguments + group.metadata {
                let h = argument.histogram
                let isInteger = argument.type != "double" && argument.type != "float" && argument.type != "metadata"
                func value(_ percentile: Double) -> String {
                    h.value(atPercentile: percentile).map { number($0, integer: isInteger) } ?? "-"
                }
                let name = argument.type == "metadata" ? "metadata \(argument.label)"
                    : argument.label.isEmpty ? "#\(argument.position)" : "#\(argument.position) \(argument.label)"
                var text = "              \(name) (\(argument.type == "metadata" ? "\(h.count) values" : argument.type)): min \(value(0))  p50 \(value(50))  p90 \(value(90))  p99 \(value(99))  p99.9 \(value(99.9))  max \(value(100))"
                if h.nanCount > 0 { text += "  nan \(grouped(h.nanCount))" }
                lines.append(text)
            }
        }
        if s.groups.count > top { lines.append("  … \(s.groups.count - top) more (--top, or --json for all)") }
        lines.append("")
        let width = s.bucketNanoseconds / 1_000_000_000
        lines.append("records per \(width == 60 ? "minute" : "\(width) s") (UTC):")
        for bucket in s.timeline where bucket.levelCounts.contains(where: { $0 > 0 }) {
            let counts = zip(LogStatistics.levelNames, bucket.levelCounts).filter { $0.1 > 0 }.map { "\($0.0) \(grouped($0.1))" }
            lines.append("  \(formatRFC3339(nanoseconds: bucket.startNanoseconds).prefix(16))Z  " + counts.joined(separator: "  "))
        }
        lines.append("")
        if s.errors.isEmpty {
            lines.append("errors: none")
        } else {
            lines.append("errors (\(s.errors.count) call sites, first occurrence first):")
            for error in s.errors {
                lines.append("  \(pad(grouped(error.count), 10))  \(pad(error.level, 8))  first \(formatRFC3339(nanoseconds: error.firstNanoseconds))  last \(formatRFC3339(nanoseconds: error.lastNanoseconds))  \(error.logger): \(error.firstMessage)")
            }
        }
        for issue in s.issues { lines.append("issue: \(issue)") }
        return lines
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }

    static func grouped(_ value: UInt64) -> String {
        let digits = Array(String(value))
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return out
    }

    /// Integers as integers; other values with 4 significant digits, no exponent between 1e-3
    /// and 1e15 (a percentile is within 0.1% anyway).
    static func number(_ value: Double, integer: Bool = false) -> String {
        guard value.isFinite else { return value.description }
        let magnitude = abs(value)
        if (integer || value == value.rounded()) && magnitude < 1e15 { return String(Int64(value.rounded())) }
        guard magnitude >= 1e-3, magnitude < 1e15 else { return String(format: "%.4g", value) }
        let digits = magnitude >= 1 ? Int(log10(magnitude)) + 1 : 0
        return String(format: "%.\(max(0, 4 - digits))f", value)
    }

    static func duration(_ seconds: Double) -> String {
        if seconds < 120 { return String(format: "%.1f s", seconds) }
        if seconds < 7200 { return String(format: "%.1f min", seconds / 60) }
        return String(format: "%.1f h", seconds / 3600)
    }
}

/// The JSON of `logbook stats --json`: times as RFC 3339 strings and nanoseconds, counts as
/// numbers, percentiles as numbers (non-finite ones as the strings "inf", "-inf").
enum StatisticsJSON {
    static func render(_ s: LogStatistics) -> String {
        var out = "{"
        out += "\"records\":\(s.records)"
        out += ",\"first\":" + time(s.firstNanoseconds) + ",\"last\":" + time(s.lastNanoseconds)
        out += ",\"levels\":{" + zip(LogStatistics.levelNames, s.levelCounts).map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",")
        out += ",\"other\":\(s.otherLevels)}"
        out += ",\"by\":\"\(s.grouping.rawValue)\""
        out += ",\"groups\":[" + s.groups.map { group in
            var g = "{\"name\":" + string(group.name)
            g += ",\"location\":" + (group.location.map(string) ?? "null")
            g += ",\"function\":" + (group.function.map(string) ?? "null")
            g += ",\"loggers\":[" + group.loggers.map(string).joined(separator: ",") + "]"
            g += ",\"level\":" + (group.level.map(string) ?? "null")
            g += ",\"count\":\(group.count),\"rate\":" + number(group.rate(over: s))
            g += ",\"first\":" + time(group.firstNanoseconds) + ",\"last\":" + time(group.lastNanoseconds)
            g += ",\"metadata\":[" + group.metadata.map { item in
                let h = item.histogram
                var m = "{\"key\":" + string(item.label) + ",\"count\":\(h.count),\"nan\":\(h.nanCount)"
                for (name, percentile) in [("min", 0.0), ("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9), ("max", 100)] {
                    m += ",\"\(name)\":" + (h.value(atPercentile: percentile).map(number) ?? "null")
                }
                return m + ",\"mean\":" + (h.mean.map(number) ?? "null") + "}"
            }.joined(separator: ",") + "]"
            g += ",\"arguments\":[" + group.arguments.map { argument in
                let h = argument.histogram
                var a = "{\"position\":\(argument.position),\"label\":" + string(argument.label)
                a += ",\"type\":" + string(argument.type) + ",\"count\":\(h.count),\"nan\":\(h.nanCount)"
                for (name, percentile) in [("min", 0.0), ("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9), ("max", 100)] {
                    a += ",\"\(name)\":" + (h.value(atPercentile: percentile).map(number) ?? "null")
                }
                a += ",\"mean\":" + (h.mean.map(number) ?? "null") + "}"
                return a
            }.joined(separator: ",") + "]}"
            return g
        }.joined(separator: ",") + "]"
        out += ",\"bucket_seconds\":\(s.bucketNanoseconds / 1_000_000_000)"
        out += ",\"timeline\":[" + s.timeline.map { bucket in
            "{\"start\":" + time(bucket.startNanoseconds) + ",\"counts\":{"
                + zip(LogStatistics.levelNames, bucket.levelCounts).map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}}"
        }.joined(separator: ",") + "]"
        out += ",\"errors\":[" + s.errors.map { error in
            "{\"template\":" + string(error.template) + ",\"location\":" + (error.location.map(string) ?? "null")
                + ",\"level\":" + string(error.level) + ",\"count\":\(error.count),\"first\":" + time(error.firstNanoseconds)
                + ",\"last\":" + time(error.lastNanoseconds) + ",\"first_message\":" + string(error.firstMessage)
                + ",\"logger\":" + string(error.logger) + "}"
        }.joined(separator: ",") + "]"
        out += ",\"issues\":[" + s.issues.map(string).joined(separator: ",") + "]"
        return out + "}"
    }

    static func time(_ nanoseconds: Int64?) -> String {
        guard let nanoseconds else { return "null" }
        return "{\"time\":\"\(formatRFC3339(nanoseconds: nanoseconds))\",\"ns\":\(nanoseconds)}"
    }

    static func string(_ text: String) -> String {
        var renderer = LineRenderer(capacity: text.utf8.count + 2)
        renderer.appendJSONString(text)
        return String(decoding: renderer.bytes, as: UTF8.self)
    }

    static func number(_ value: Double) -> String {
        guard value.isFinite else { return value.isNaN ? "null" : (value > 0 ? "\"inf\"" : "\"-inf\"") }
        if value == value.rounded(), abs(value) < 9e15 { return String(Int64(value)) }
        return "\(value)"
    }
}
