// LogReport: histogram axes, the errors table and the renderer's small helpers.

import Logbook
import Foundation

// MARK: - Histogram axis

extension LogReport {
    /// Maps values to x for a histogram: linear or log10 as the bins say, or evenly by bin index
    /// when their bounds cannot be placed on that axis (not finite, not positive on a log axis,
    /// or all equal).
    struct HistogramScale {
        enum Mode { case linear, logarithmic, index }

        let bins: [ValueHistogram.Bin]
        /// The axis used: as the bins ask when their bounds allow it.
        let mode: Mode
        let left: Double
        let width: Double
        /// Transformed ends of the axis.
        let low: Double
        let high: Double

        init(bins: ValueHistogram.Bins, left: Double, width: Double) {
            self.bins = bins.bins
            self.left = left
            self.width = width
            let bounds = bins.bins.flatMap { [$0.lowerBound, $0.upperBound] }
            let finite = bounds.allSatisfy(\.isFinite)
            let lower = bounds.min() ?? 0, upper = bounds.max() ?? 0
            if finite, bins.logarithmic, lower > 0, upper > lower {
                mode = .logarithmic
                (low, high) = (log10(lower), log10(upper))
            } else if finite, upper > lower {
                mode = .linear
                (low, high) = (lower, upper)
            } else {
                mode = .index
                (low, high) = (0, Double(bins.bins.count))
            }
        }

        private func transformed(_ value: Double) -> Double? {
            switch mode {
            case .linear: return value
            case .logarithmic: return value > 0 ? log10(value) : nil
            case .index:
                // Position within the bin holding the value (or the nearest end).
                guard !value.isNaN, let first = bins.first, let last = bins.last else { return nil }
                if value <= first.lowerBound { return 0 }
                if value >= last.upperBound { return Double(bins.count) }
                for (index, bin) in bins.enumerated() where value <= bin.upperBound {
                    let span = bin.upperBound - bin.lowerBound
                    let fraction = span.isFinite && span > 0 ? (value - bin.lowerBound) / span : 0.5
                    return Double(index) + min(max(fraction, 0), 1)
                }
                return Double(bins.count)
            }
        }

        /// The x of `value`, nil when it has none (NaN, or not positive on a log axis).
        func x(_ value: Double) -> Double? {
            guard value.isFinite || mode == .index, let t = transformed(value), t.isFinite else { return nil }
            return left + (t - low) / (high - low) * width
        }

        /// The x range of bin `index`.
        func span(ofBin index: Int) -> (Double, Double) {
            if mode == .index {
                let step = width / Double(max(1, bins.count))
                return (left + Double(index) * step, left + Double(index + 1) * step)
            }
            let bin = bins[index]
            let x0 = x(bin.lowerBound) ?? left, x1 = x(bin.upperBound) ?? left + width
            return (min(x0, x1), max(x0, x1))
        }

        /// Values to label: round numbers on a linear axis, powers of ten (with 2 and 5 times them
        /// over fewer than three decades) on a log axis, the ends and middle on an index axis.
        func ticks(integer: Bool) -> [Double] {
            switch mode {
            case .linear:
                let step = niceStep((high - low) / 5, integral: integer && high - low >= 5)
                var values: [Double] = []
                var value = (low / step).rounded(.up) * step
                while value <= high + step * 1e-9, values.count < 50 {
                    values.append(abs(value) < step * 1e-9 ? 0 : value)
                    value += step
                }
                return values
            case .logarithmic:
                let firstDecade = Int(low.rounded(.down)), lastDecade = Int(high.rounded(.up))
                let decades = lastDecade - firstDecade
                let stride = max(1, (decades + 5) / 6)
                let multiples: [Double] = decades < 3 ? [1, 2, 5] : [1]
                var values: [Double] = []
                for decade in Swift.stride(from: firstDecade, through: lastDecade, by: stride) {
                    for multiple in multiples {
                        let value = multiple * pow(10, Double(decade))
                        if log10(value) >= low - 1e-9, log10(value) <= high + 1e-9 { values.append(value) }
                    }
                }
                return values
            case .index:
                guard let first = bins.first, let last = bins.last else { return [] }
                let middle = bins[bins.count / 2].lowerBound
                return [first.lowerBound, middle, last.upperBound].filter(\.isFinite)
            }
        }
    }
}

// MARK: - Errors

extension LogReport.Renderer {
    mutating func renderErrors() {
        let errors = statistics.errors
        out += "<section id=\"errors\">\n<h2>Errors</h2>\n"
        guard !errors.isEmpty else {
            out += "<p class=\"empty ok\">No errors.</p>\n</section>\n"
            return
        }
        out += """
            <p class="note">Call sites that logged at error or critical level or attached an error, first occurrence first.</p>
            <div class="scroll"><table class="data sortable wide">
            <thead><tr><th>Level</th><th>Template</th><th>Location</th><th>Logger</th><th data-type="num" class="num">Count</th>\
            <th data-type="num">First</th><th>First message</th></tr></thead>
            <tbody>

            """
        for error in errors.prefix(LogReport.Limits.errors) {
            out += """
                <tr><td data-v="\(levelRank(error.level))">\(levelChip(error.level))</td>\
                <td class="template">\(LogReport.templateText(error.template))</td>\
                <td class="location">\(locationText(error.location, function: nil))</td>\
                <td class="loggers"><span class="logger">\(LogReport.userText(error.logger, limit: 120))</span></td>\
                <td class="num" data-v="\(error.count)">\(LogReport.count(error.count))</td>\(timeCell(error.firstNanoseconds))\
                <td class="message"><div>\(LogReport.userText(error.firstMessage, limit: LogReport.Limits.messageCharacters))</div></td></tr>

                """
        }
        out += "</tbody></table></div>\n"
        if errors.count > LogReport.Limits.errors {
            out += "<p class=\"more\">\(LogReport.count(errors.count - LogReport.Limits.errors)) more not shown.</p>\n"
        }
        out += "</section>\n"
    }
}

// MARK: - Small helpers

extension LogReport.Renderer {
    /// An SVG coordinate with at most one decimal.
    func n(_ value: Double) -> String { LogReport.fixed(value, fractionDigits: 1, grouping: false) }

    /// A number for a script or a `data-v` sort key ("Infinity", "NaN" included).
    func jsNumber(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
        return value == value.rounded() && abs(value) < 9e15 ? String(Int64(value)) : "\(value)"
    }

    func count(_ value: UInt64) -> String { LogReport.count(value) }
    /// A count axis label: "2,500", "25k".
    func countLabel(_ value: Double) -> String {
        value < 10_000 ? LogReport.fixed(value, fractionDigits: 0) : LogReport.compact(value, integer: true)
    }
    func count(_ value: Int) -> String { LogReport.count(value) }
    func real(_ value: Double) -> String { LogReport.real(value) }
    func value(_ value: Double, integer: Bool) -> String { LogReport.value(value, integer: integer) }
    func compact(_ value: Double, integer: Bool) -> String { LogReport.compact(value, integer: integer) }
    func percent(_ part: UInt64, of whole: UInt64) -> String { LogReport.percent(part, of: whole) }
    func duration(nanoseconds: Int64) -> String { LogReport.duration(nanoseconds: nanoseconds) }
    func perWidth(nanoseconds: Int64) -> String { LogReport.perWidth(nanoseconds: nanoseconds) }
    func rfc3339(_ nanoseconds: Int64) -> String { LogReport.rfc3339(nanoseconds) }
    func escape(_ text: String, limit: Int? = nil, markup: Bool = true) -> String {
        LogReport.escape(text, limit: limit, markup: markup)
    }
    func userText(_ text: String, limit: Int = LogReport.Limits.nameCharacters) -> String {
        LogReport.userText(text, limit: limit)
    }
    func templateText(_ template: String) -> String { LogReport.templateText(template) }
    func niceStep(_ raw: Double, integral: Bool) -> Double { LogReport.niceStep(raw, integral: integral) }
    func saturatingAdd(_ a: UInt64, _ b: UInt64) -> UInt64 { LogReport.saturatingAdd(a, b) }
    func saturatingAdd(_ a: Int64, _ b: Int64) -> Int64 { LogReport.saturatingAdd(a, b) }

    /// A warning triangle, inline so that it needs no font.
    var warningIcon: String {
        ##"<svg class="icon" viewBox="0 0 24 24" aria-hidden="true"><path d="M12 2 1 21h22L12 2z" fill="#d97706"/><path d="M11 9h2v6h-2zm0 8h2v2h-2z" fill="#fff"/></svg>"##
    }
}
