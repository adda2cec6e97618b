import Logbook

/// HTTP-date (RFC 9110, section 5.6.7) and `Retry-After` (section 10.2.3), parsed without
/// Foundation: the three date forms a recipient must accept, and delay-seconds.
public enum HTTPDate {
    /// Seconds since the Unix epoch for an HTTP-date in any of its three forms, or `nil`:
    /// - IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT` (what servers send)
    /// - obsolete RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`
    /// - obsolete asctime: `Sun Nov  6 08:49:37 1994`
    ///
    /// A two-digit year (RFC 850) is the most recent year with those digits that is not more than
    /// 50 years after `nowSeconds`, as the RFC requires.
    public static func parse(_ text: String, nowSeconds: Int64) -> Int64? {
        let bytes = Array(text.utf8)
        var scanner = Scanner(bytes: bytes)
        scanner.skipSpaces()
        guard let dayName = scanner.letters() else { return nil }
        if scanner.take(UInt8(ascii: ",")) {
            if shortDays.contains(dayName) {
                // IMF-fixdate: ", " 2DIGIT SP month SP 4DIGIT SP time SP "GMT"
                guard scanner.take(32), let day = scanner.digits(exactly: 2), scanner.take(32),
                      let month = scanner.month(), scanner.take(32), let year = scanner.digits(exactly: 4),
                      scanner.take(32), let time = scanner.time(), scanner.take(32), scanner.literal("GMT")
                else { return nil }
                return scanner.atEnd ? epochSeconds(year, month, day, time) : nil
            }
            // RFC 850: ", " 2DIGIT "-" month "-" 2DIGIT SP time SP "GMT"
            guard longDays.contains(dayName), scanner.take(32), let day = scanner.digits(exactly: 2),
                  scanner.take(UInt8(ascii: "-")), let month = scanner.month(), scanner.take(UInt8(ascii: "-")),
                  let shortYear = scanner.digits(exactly: 2), scanner.take(32), let time = scanner.time(),
                  scanner.take(32), scanner.literal("GMT"), scanner.atEnd
            else { return nil }
            return epochSeconds(fullYear(shortYear, nowSeconds: nowSeconds), month, day, time)
        }
        // asctime: SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time SP 4DIGIT
        guard shortDays.contains(dayName), scanner.take(32), let month = scanner.month(), scanner.take(32) else {
            return nil
        }
        let day: Int
        if scanner.take(32) {
            guard let digit = scanner.digits(exactly: 1) else { return nil }
            day = digit
        } else {
            guard let digits = scanner.digits(exactly: 2) else { return nil }
            day = digits
        }
        guard scanner.take(32), let time = scanner.time(), scanner.take(32), let year = scanner.digits(exactly: 4) else {
            return nil
        }
        scanner.skipSpaces()
        return scanner.atEnd ? epochSeconds(year, month, day, time) : nil
    }

    private static let shortDays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let longDays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    fileprivate static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func fullYear(_ twoDigits: Int, nowSeconds: Int64) -> Int {
        let currentYear = civilYear(nowSeconds)
        var year = currentYear - currentYear % 100 + twoDigits
        if year > currentYear + 50 { year -= 100 }
        return year
    }

    /// The proleptic Gregorian year of a Unix time.
    private static func civilYear(_ seconds: Int64) -> Int {
        Int(CivilDate.date(days: seconds.quotientAndRemainder(dividingBy: 86_400).quotient).year)
    }

    private static func epochSeconds(_ year: Int, _ month: Int, _ day: Int, _ time: (Int, Int, Int)) -> Int64? {
        guard (1...31).contains(day), time.0 < 24, time.1 < 60, time.2 < 61 else { return nil }  // 60: a leap second
        let daysInMonth = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        guard day <= daysInMonth[month - 1] + (month == 2 && leap ? 1 : 0) else { return nil }
        let days = CivilDate.days(year: Int64(year), month: Int64(month), day: Int64(day))
        return days * 86_400 + Int64(time.0 * 3600 + time.1 * 60 + min(time.2, 59))
    }
}

/// A byte cursor for the fixed-width grammars above.
private struct Scanner {
    let bytes: [UInt8]
    var index = 0

    var atEnd: Bool { index == bytes.count }

    mutating func skipSpaces() {
        while index < bytes.count && (bytes[index] == 32 || bytes[index] == 9) { index += 1 }
    }

    mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    mutating func literal(_ text: String) -> Bool {
        let expected = Array(text.utf8)
        guard bytes.count - index >= expected.count, Array(bytes[index..<index + expected.count]) == expected else {
            return false
        }
        index += expected.count
        return true
    }

    mutating func letters() -> String? {
        let start = index
        while index < bytes.count, (65...90).contains(bytes[index]) || (97...122).contains(bytes[index]) { index += 1 }
        return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
    }

    mutating func digits(exactly count: Int) -> Int? {
        guard bytes.count - index >= count else { return nil }
        var value = 0
        for offset in 0..<count {
            let byte = bytes[index + offset]
            guard (48...57).contains(byte) else { return nil }
            value = value * 10 + Int(byte - 48)
        }
        index += count
        return value
    }

    /// A month name (case-sensitive, as the grammar says), 1...12.
    mutating func month() -> Int? {
        guard bytes.count - index >= 3 else { return nil }
        let name = String(decoding: bytes[index..<index + 3], as: UTF8.self)
        guard let position = HTTPDate.months.firstIndex(of: name) else { return nil }
        index += 3
        return position + 1
    }

    /// `HH:MM:SS`.
    mutating func time() -> (Int, Int, Int)? {
        guard let hour = digits(exactly: 2), take(UInt8(ascii: ":")), let minute = digits(exactly: 2),
              take(UInt8(ascii: ":")), let second = digits(exactly: 2)
        else { return nil }
        return (hour, minute, second)
    }
}
