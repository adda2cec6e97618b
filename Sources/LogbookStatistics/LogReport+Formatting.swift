// LogReport: escaping of text from the logs, and numbers, times and durations as the page shows them.

import Logbook
import Foundation

// MARK: - Escaping

extension LogReport {
    /// `text` made safe as HTML text or as a double- or single-quoted attribute value: markup
    /// characters become references; control characters other than tab and line breaks become a
    /// visible `\x1B` (in a highlighted span when `markup`, which is only for element content;
    /// plain text otherwise), noncharacters U+FFFD. Cut to `limit` grapheme clusters (with "…")
    /// when given, so that no emoji or combined character is split.
    static func escape(_ text: String, limit: Int? = nil, markup: Bool = true) -> String {
        var source = Substring(text)
        var truncated = false
        if let limit, let end = text.index(text.startIndex, offsetBy: limit, limitedBy: text.endIndex),
            end != text.endIndex
        {
            source = text[..<end]
            truncated = true
        }
        var out = ""
        out.reserveCapacity(source.utf8.count + 16)
        for scalar in source.unicodeScalars {
            switch scalar.value {
            case 0x26: out += "&amp;"
            case 0x3C: out += "&lt;"
            case 0x3E: out += "&gt;"
            case 0x22: out += "&quot;"
            case 0x27: out += "&#39;"
            case 0x09, 0x0A, 0x0D: out.unicodeScalars.append(scalar)
            case 0x00...0x1F, 0x7F...0x9F:
                let digits = String(scalar.value, radix: 16, uppercase: true)
                let code = "\\x" + (digits.count < 2 ? "0" : "") + digits
                out += markup ? "<span class=\"ctl\">\(code)</span>" : code
            case 0xFDD0...0xFDEF: out += "\u{FFFD}"
            case let value where value & 0xFFFE == 0xFFFE: out += "\u{FFFD}"  // U+xFFFE, U+xFFFF
            default: out.unicodeScalars.append(scalar)
            }
        }
        if truncated { out += "…" }
        return out
    }

    /// User text for an HTML cell: escaped, isolated from the surrounding text's direction
    /// (right-to-left names or stray bidi controls cannot reorder the page around them).
    static func userText(_ text: String, limit: Int = Limits.nameCharacters) -> String {
        "<bdi>\(escape(text, limit: limit))</bdi>"
    }

    /// A template with its `{}` placeholders highlighted (after escaping, which leaves braces
    /// alone, so the markup added cannot come from the text).
    static func templateText(_ template: String) -> String {
        let escaped = escape(template, limit: Limits.nameCharacters)
        return "<bdi>" + escaped.replacingOccurrences(of: "{}", with: "<span class=\"ph\">{}</span>") + "</bdi>"
    }
}

// MARK: - Number, time and duration formatting

extension LogReport {
    /// Whether an argument's stored type name denotes an integer type ("int", "int64", "uint8",
    /// "UInt32" …), whose values are shown without decimals.
    static func isIntegerType(_ type: String) -> Bool {
        var name = Substring(type.lowercased())
        if name.hasPrefix("u") { name = name.dropFirst() }
        guard name.hasPrefix("int") else { return false }
        return name.dropFirst(3).allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// `digits` (ASCII digits only) with a comma every three digits from the right.
    static func grouped(_ digits: String) -> String {
        let characters = Array(digits)
        var out = ""
        out.reserveCapacity(characters.count + characters.count / 3)
        for (index, character) in characters.enumerated() {
            if index > 0, (characters.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return out
    }

    /// A count with thousands separators: "1,234,567".
    static func count(_ value: UInt64) -> String { grouped(String(value)) }

    static func count(_ value: Int) -> String {
        value < 0 ? "-" + grouped(String(value.magnitude)) : grouped(String(value))
    }

    /// `value` rounded to `fractionDigits` decimals (0...9), trailing zeros dropped; locale
    /// independent. Falls back to ``scientific(_:)`` beyond 9e18 after scaling.
    static func fixed(_ value: Double, fractionDigits: Int, grouping: Bool = true) -> String {
        guard value.isFinite else { return special(value) }
        let digits = min(max(fractionDigits, 0), 9)
        var power: UInt64 = 1
        for _ in 0..<digits { power *= 10 }
        let scaled = (abs(value) * Double(power)).rounded()
        guard scaled < 9e18 else { return scientific(value) }
        let units = UInt64(scaled)
        let integerPart = String(units / power)
        var text = grouping ? grouped(integerPart) : integerPart
        if digits > 0 {
            var fraction = String(units % power)
            fraction = String(repeating: "0", count: digits - fraction.count) + fraction
            while fraction.last == "0" { fraction.removeLast() }
            if !fraction.isEmpty { text += "." + fraction }
        }
        return (value < 0 && units != 0 ? "-" : "") + text
    }

    /// "1.235e-7": four significant digits and a decimal exponent.
    static func scientific(_ value: Double) -> String {
        guard value.isFinite else { return special(value) }
        guard value != 0 else { return "0" }
        let magnitude = abs(value)
        var exponent = Int(log10(magnitude).rounded(.down))
        var mantissa = magnitude / pow(10, Double(exponent))
        if (mantissa * 1000).rounded() >= 10_000 {
            exponent += 1
            mantissa = magnitude / pow(10, Double(exponent))
        } else if mantissa < 1 {
            exponent -= 1
            mantissa = magnitude / pow(10, Double(exponent))
        }
        guard mantissa.isFinite else { return "\(value)" }
        return (value < 0 ? "-" : "") + fixed(mantissa, fractionDigits: 3, grouping: false) + "e" + String(exponent)
    }

    /// Infinities and NaN as text.
    static func special(_ value: Double) -> String {
        value.isNaN ? "NaN" : (value < 0 ? "-∞" : "∞")
    }

    /// A real number with about four significant digits: "0.01235", "12.35", "1,235", "123,457";
    /// scientific beyond 1e15 and below 1e-4.
    static func real(_ value: Double) -> String {
        guard value.isFinite else { return special(value) }
        guard value != 0 else { return "0" }
        let magnitude = abs(value)
        if magnitude >= 1e15 || magnitude < 1e-4 { return scientific(value) }
        if magnitude >= 1000 { return fixed(value, fractionDigits: 0) }
        let exponent = Int(log10(magnitude).rounded(.down))
        return fixed(value, fractionDigits: max(0, 3 - exponent))
    }

    /// An argument's value: integer types without decimals (values of the histogram are
    /// approximations, rounded here), others with about four significant digits.
    static func value(_ value: Double, integer: Bool) -> String {
        guard value.isFinite else { return special(value) }
        guard integer else { return real(value) }
        return abs(value) < 1e15 ? fixed(value, fractionDigits: 0) : scientific(value)
    }

    /// A short axis label: "0.5", "250", "1.5k", "20M".
    static func compact(_ value: Double, integer: Bool) -> String {
        guard value.isFinite else { return special(value) }
        let magnitude = abs(value)
        for (size, suffix) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] where magnitude >= size {
            let scaled = value / size
            if abs(scaled) >= 1000 { return scientific(value) }
            return fixed(scaled, fractionDigits: abs(scaled) >= 100 ? 0 : abs(scaled) >= 10 ? 1 : 2, grouping: false)
                + suffix
        }
        return integer ? fixed(value, fractionDigits: 0) : real(value)
    }

    /// A share in percent: "12.3%", "<0.1%".
    static func percent(_ part: UInt64, of whole: UInt64) -> String {
        guard whole > 0 else { return "–" }
        let share = Double(part) / Double(whole) * 100
        if part > 0, share < 0.1 { return "<0.1%" }
        return fixed(share, fractionDigits: 1) + "%"
    }

    /// A duration for people: "350 ms", "12.5 s", "4 min 10 s", "3 h 0 min", "2 d 4 h".
    static func duration(nanoseconds: Int64) -> String {
        let ns = nanoseconds.magnitude
        if ns < 1_000 { return "\(ns) ns" }
        if ns < 1_000_000 { return real(Double(ns) / 1e3) + " µs" }
        if ns < 1_000_000_000 { return real(Double(ns) / 1e6) + " ms" }
        if ns < 60_000_000_000 { return real(Double(ns) / 1e9) + " s" }
        let seconds = ns / 1_000_000_000
        func join(_ major: String, _ minor: UInt64, _ unit: String) -> String {
            minor == 0 ? major : "\(major) \(minor) \(unit)"
        }
        if seconds < 3_600 { return join("\(seconds / 60) min", seconds % 60, "s") }
        if seconds < 86_400 { return join("\(seconds / 3_600) h", seconds % 3_600 / 60, "min") }
        return join("\(count(seconds / 86_400)) d", seconds % 86_400 / 3_600, "h")
    }

    /// A bucket width after "per": "minute", "5 minutes", "30 seconds", "hour", "250 ms".
    static func perWidth(nanoseconds: Int64) -> String {
        guard nanoseconds > 0 else { return "bucket" }
        let units: [(Int64, String, String)] = [
            (86_400_000_000_000, "day", "days"), (3_600_000_000_000, "hour", "hours"),
            (60_000_000_000, "minute", "minutes"), (1_000_000_000, "second", "seconds"),
            (1_000_000, "millisecond", "milliseconds"), (1_000, "microsecond", "microseconds"),
            (1, "nanosecond", "nanoseconds"),
        ]
        for (size, one, many) in units where nanoseconds % size == 0 {
            let amount = nanoseconds / size
            return amount == 1 ? one : "\(count(Int(amount))) \(many)"
        }
        return "\(nanoseconds) nanoseconds"
    }

    /// A UTC calendar time, computed without Foundation's calendars (no locale or time zone).
    struct UTCTime {
        var year: Int64, month: Int, day: Int, hour: Int, minute: Int, second: Int, nanosecond: Int

        init(nanoseconds: Int64) {
            var (seconds, nanos) = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
            if nanos < 0 { seconds -= 1; nanos += 1_000_000_000 }
            var (days, secondOfDay) = seconds.quotientAndRemainder(dividingBy: 86_400)
            if secondOfDay < 0 { days -= 1; secondOfDay += 86_400 }
            // Days since 1970-01-01 to a proleptic Gregorian date: the one calendar of Logbook.
            let date = CivilDate.date(days: days)
            (year, month, day) = (date.year, Int(date.month), Int(date.day))
            hour = Int(secondOfDay / 3_600)
            minute = Int(secondOfDay % 3_600 / 60)
            second = Int(secondOfDay % 60)
            nanosecond = Int(nanos)
        }

        /// "2024-05-01"
        var date: String {
            let yearText = year < 0 ? "-" + pad(Int(year.magnitude), 4) : pad(Int(year), 4)
            return "\(yearText)-\(pad(month, 2))-\(pad(day, 2))"
        }

        /// "12:34", "12:34:56" or "12:34:56.789" (the fraction truncated, never rounded up).
        func clock(seconds: Bool = true, fractionDigits: Int = 0) -> String {
            var text = "\(pad(hour, 2)):\(pad(minute, 2))"
            if seconds { text += ":\(pad(second, 2))" }
            if seconds, fractionDigits > 0 {
                let digits = min(fractionDigits, 9)
                var divisor = 1
                for _ in digits..<9 { divisor *= 10 }
                text += "." + pad(nanosecond / divisor, digits)
            }
            return text
        }

        /// RFC 3339 in UTC: "2024-05-01T12:34:56.789Z".
        func rfc3339(fractionDigits: Int = 3) -> String {
            "\(date)T\(clock(fractionDigits: fractionDigits))Z"
        }

        private func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
        }
    }

    static func rfc3339(_ nanoseconds: Int64, fractionDigits: Int = 3) -> String {
        UTCTime(nanoseconds: nanoseconds).rfc3339(fractionDigits: fractionDigits)
    }

    /// 1, 2 or 5 times a power of ten, at least `raw` (and at least 1 when `integral`).
    static func niceStep(_ raw: Double, integral: Bool) -> Double {
        guard raw.isFinite, raw > 0 else { return 1 }
        let power = pow(10, log10(raw).rounded(.down))
        let fraction = raw / power
        let step = (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * power
        return integral ? max(1, step.rounded(.up)) : step
    }
}
