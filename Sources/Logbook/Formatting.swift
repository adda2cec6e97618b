/// Text helpers shared by the reader's users (the CLI, tests): time stamps and escaping.

/// The proleptic Gregorian calendar against days since 1970-01-01 (Howard Hinnant's algorithms),
/// for every date Logbook parses or prints: RFC 3339 here, HTTP-dates in LogbookUpload.
package enum CivilDate {
    /// Days since the epoch of a date (month 1...12; not validated).
    package static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let monthPrime = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * monthPrime + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date of a day since the epoch.
    package static func date(days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPrime = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
        let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// RFC 3339 UTC with nanoseconds: `2026-11-21T08:13:00.000000042Z`.
public func formatRFC3339(nanoseconds: Int64) -> String {
    String(unsafeUninitializedCapacity: 30) { buffer in
        writeRFC3339(nanoseconds: nanoseconds, fractionDigits: 9, to: buffer)
    }
}

/// Writes `YYYY-MM-DDThh:mm:ss.` then the first `fractionDigits` (1 to 9) digits of the second
/// and `Z` into `buffer` (21 + `fractionDigits` bytes): the one RFC 3339 formatter (`show`, JSON
/// lines, syslog's TIMESTAMP with 6 digits). Returns the bytes written. Any Int64 is a year from
/// 1677 to 2262, so the form is always fixed width; the fraction is truncated, never rounded.
@discardableResult
package func writeRFC3339(nanoseconds: Int64, fractionDigits: Int, to buffer: UnsafeMutableBufferPointer<UInt8>) -> Int {
    // Truncating division and a correction: no overflow, Int64.min included.
    var seconds = nanoseconds / 1_000_000_000
    var fraction = nanoseconds % 1_000_000_000
    if fraction < 0 {
        fraction += 1_000_000_000
        seconds -= 1
    }
    var days = seconds / 86_400
    var rest = seconds % 86_400
    if rest < 0 {
        rest += 86_400
        days -= 1
    }
    let (year, month, day) = CivilDate.date(days: days)
    let digits = min(9, max(1, fractionDigits))
    func put(_ value: Int64, _ width: Int, at offset: Int) {
        var value = value
        for position in stride(from: offset + width - 1, through: offset, by: -1) {
            buffer[position] = UInt8(truncatingIfNeeded: 48 + value % 10)
            value /= 10
        }
    }
    put(year, 4, at: 0)
    buffer[4] = 45
    put(month, 2, at: 5)
    buffer[7] = 45
    put(day, 2, at: 8)
    buffer[10] = 84
    put(rest / 3600, 2, at: 11)
    buffer[13] = 58
    put(rest / 60 % 60, 2, at: 14)
    buffer[16] = 58
    put(rest % 60, 2, at: 17)
    buffer[19] = 46
    var scaled = fraction
    for _ in digits..<9 { scaled /= 10 }
    put(scaled, digits, at: 20)
    buffer[20 + digits] = 90
    return 21 + digits
}

/// Parses RFC 3339 (`2026-11-21T08:13:00Z`, optional fraction, `Z` or `±hh:mm`) to nanoseconds
/// since the epoch; `nil` for malformed text or a time outside 1677...2262.
public func parseRFC3339(_ text: String) -> Int64? {
    let bytes = Array(text.utf8)
    func number(_ start: Int, _ count: Int) -> Int64? {
        guard start + count <= bytes.count else { return nil }
        var value: Int64 = 0
        for byte in bytes[start..<start + count] {
            guard byte >= 48, byte <= 57 else { return nil }
            value = value * 10 + Int64(byte - 48)
        }
        return value
    }
    guard bytes.count >= 20, let year = number(0, 4), bytes[4] == 45, let month = number(5, 2), bytes[7] == 45,
        let day = number(8, 2), bytes[10] == 84 || bytes[10] == 116 || bytes[10] == 32, let hour = number(11, 2),
        bytes[13] == 58, let minute = number(14, 2), bytes[16] == 58, let second = number(17, 2),
        (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
    else { return nil }
    var index = 19
    var fraction: Int64 = 0
    if index < bytes.count, bytes[index] == 46 {
        index += 1
        var digits = 0
        while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
            if digits < 9 { fraction = fraction * 10 + Int64(bytes[index] - 48) }
            digits += 1
            index += 1
        }
        guard digits > 0 else { return nil }
        for _ in min(digits, 9)..<9 { fraction *= 10 }
    }
    var offset: Int64 = 0
    guard index < bytes.count else { return nil }
    if bytes[index] == 90 || bytes[index] == 122 {
        index += 1
    } else if bytes[index] == 43 || bytes[index] == 45, let oh = number(index + 1, 2), bytes.count > index + 3,
        bytes[index + 3] == 58, let om = number(index + 4, 2), oh < 24, om < 60  // RFC 3339: time-numoffset
    {
        offset = (oh * 60 + om) * 60 * (bytes[index] == 43 ? 1 : -1)
        index += 6
    } else {
        return nil
    }
    guard index == bytes.count else { return nil }
    let days = CivilDate.days(year: year, month: month, day: day)
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
    // Int64 nanoseconds reach from 1677 to 2262: anything outside is not a time we can compare.
    let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    guard !overflow, scaled <= Int64.max - fraction else { return nil }
    return scaled + fraction
}

/// How logged text is made safe for where it goes. The byte test below is the one fast path of
/// every escaper: text without any of these bytes is copied as it is.
enum Escaping {
    case none
    /// Everything a terminal would act on or hide (`isUnsafeForTerminal`), written `\u{…}`.
    case terminal
    /// Quote, backslash, and everything `isUnsafeForTerminal` as `\uXXXX` (JSON lines are read in
    /// terminals too).
    case json

    /// Whether `byte` can never start something this escaping changes: printable ASCII, and every
    /// UTF-8 lead byte but those that begin a control or format character (`unsafeLeadBytes`), so
    /// that Latin, Cyrillic or CJK text is copied as it is. Quote and backslash matter only to JSON.
    @inline(__always)
    func isClean(_ byte: UInt8) -> Bool {
        // One bit per byte value, four words: a shift and a mask per byte, as cheap as the ASCII
        // range test it replaces (the masks are `isUnsafeLead` and the ASCII rules, tabulated).
        let masks: (UInt64, UInt64, UInt64, UInt64)
        switch self {
        case .none: return true
        case .terminal: masks = (0xFFFF_FFFF_0000_0000, 0x7FFF_FFFF_FFFF_FFFF, ~0, 0xFFF6_7FF8_E6FF_FFFB)
        case .json: masks = (0xFFFF_FFFB_0000_0000, 0x7FFF_FFFF_EFFF_FFFF, ~0, 0xFFF6_7FF8_E6FF_FFFB)
        }
        let word = byte < 0x40 ? masks.0 : byte < 0x80 ? masks.1 : byte < 0xC0 ? masks.2 : masks.3
        return (word >> UInt64(byte & 63)) & 1 != 0
    }

    /// The UTF-8 lead bytes of every scalar `isUnsafeForTerminal` escapes: C2 (C1 controls,
    /// U+00AD), D8 DB DC (U+0600–U+070F), E0 (U+0890–U+08E2), E1 (U+180E), E2 (U+200B–U+206F),
    /// EF (U+FEFF, U+FFF9–U+FFFB), F0 (U+110BD–U+1D17A), F3 (tags). Continuation bytes (80–BF)
    /// never start a scalar. `TerminalEscapingTests` checks this against every scalar.
    @inline(__always)
    static func isUnsafeLead(_ byte: UInt8) -> Bool {
        switch byte {
        case 0xC2, 0xD8, 0xDB, 0xDC, 0xE0, 0xE1, 0xE2, 0xEF, 0xF0, 0xF3: true
        default: false
        }
    }

    /// Whether `utf8` (valid UTF-8) holds anything this escaping changes. Bytes that pass
    /// `isClean` are skipped; a scalar is decoded only at an unsafe lead byte.
    func needsEscaping(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        switch self {
        case .none: return false
        // Printable ASCII, the common case, in a loop simple enough for the compiler to vectorize.
        case .terminal: if utf8.allSatisfy({ $0 &- 0x20 < 0x5F }) { return false }
        case .json: if utf8.allSatisfy({ $0 &- 0x20 < 0x5F && $0 != 0x22 && $0 != 0x5C }) { return false }
        }
        var index = 0
        let count = utf8.count
        while index < count {
            let byte = utf8[index]
            if isClean(byte) {
                index += 1
                continue
            }
            if byte < 0x80 { return true }  // a control, DEL, or (JSON) a quote or backslash
            let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2
            guard index + length <= count else { return true }
            var value = UInt32(byte) & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07)
            for offset in 1..<length { value = value << 6 | UInt32(utf8[index + offset] & 0x3F) }
            guard let scalar = Unicode.Scalar(value), !isUnsafeForTerminal(scalar) else { return true }
            index += length
        }
        return false
    }

    func needsEscaping(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { needsEscaping($0) }
    }

    /// `text` as ``LineRenderer`` writes it: escaped only when it needs to be.
    func escapeIfNeeded(_ text: String) -> String { needsEscaping(text) ? escape(text) : text }

    func escape(_ text: String) -> String {
        switch self {
        case .none: text
        case .terminal: escapingControlCharacters(text)
        case .json: escapingJSON(text)
        }
    }
}

/// Makes logged text safe for a terminal: control characters become `\n`, `\t`, `\u{1b}`...,
/// and so do the invisible characters that change how a line reads (bidirectional overrides and
/// isolates such as U+202E, zero-width characters, the byte order mark: Unicode's format
/// characters), so that what a terminal shows is what was logged.
public func escapingControlCharacters(_ text: String) -> String {
    guard Escaping.terminal.needsEscaping(text) else { return text }
    var out = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where isUnsafeForTerminal(scalar): out += "\\u{" + String(scalar.value, radix: 16) + "}"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// The one decision of what a terminal must not receive raw: C0 and C1 controls and DEL (escape
/// sequences: colours, titles, cursor moves), the line and paragraph separators, and Unicode's
/// format characters (general category Cf: U+200B–U+200F, U+202A–U+202E, U+2060–U+2064,
/// U+2066–U+206F, U+FEFF, U+00AD, U+061C, tags...), which are invisible and can reorder a line.
func isUnsafeForTerminal(_ scalar: Unicode.Scalar) -> Bool {
    let value = scalar.value
    if value < 0xA0 { return value < 0x20 || value >= 0x7F }
    if value < 0x600 { return value == 0xAD }  // Latin, Greek, Cyrillic...: one Cf, the soft hyphen
    if value == 0x2028 || value == 0x2029 { return true }
    // No Cf in these (CJK, most symbols; emoji): answered without a property lookup.
    if (0x2070..<0xFEFF).contains(value) || (0x1D17B..<0xE0000).contains(value) { return false }
    return scalar.properties.generalCategory == .format
}

/// Escapes text for a JSON string literal (without the quotes).
public func escapingJSON(_ text: String) -> String {
    guard Escaping.json.needsEscaping(text) else { return text }
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where isUnsafeForTerminal(scalar):
            if scalar.value > 0xFFFF {  // JSON spells a scalar past the BMP as a surrogate pair
                for unit in String(scalar).utf16 { out += "\\u" + hex4(UInt32(unit)) }
            } else {
                out += "\\u" + hex4(scalar.value)
            }
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out
}

private func hex4(_ value: UInt32) -> String {
    let hex = String(value, radix: 16)
    return String(repeating: "0", count: max(0, 4 - hex.count)) + hex
}
