import Foundation

/// How a map reads dates from records and writes them back on export.
///
/// For example:
///
/// ```swift
/// ObjectMap<Post>("published", to: "publishedAt")                                  // ISO 8601
/// ObjectMap<Post>("day", to: "publishedAt", dateFormat: .custom("dd/MM/yyyy"))     // 24/12/2024, UTC
/// ObjectMap<Post>("ts", to: "publishedAt", dateFormat: .secondsSince1970)          // 1735000000
/// ```
public enum DateFormat: Sendable, Hashable {
    /// ISO 8601 (the default): `2024-12-24T18:30:00Z`, with or without fractional seconds
    /// (any number of digits, kept to the microsecond), `Z` or an offset such as
    /// `+01:00`; a time without a zone is read as UTC, a date alone as its midnight UTC.
    /// Exported in UTC with the fractional seconds when there are any
    /// (`2024-12-24T18:30:00.25Z`).
    case iso8601
    /// A `DateFormatter` pattern (Unicode TR 35, such as `yyyy-MM-dd HH:mm`), read and
    /// written with the POSIX locale in the given time zone.
    case custom(String, timeZone: TimeZone = .gmt)
    /// A number of seconds since 1970-01-01T00:00:00Z (fractions allowed).
    case secondsSince1970
    /// A number of milliseconds since 1970-01-01T00:00:00Z.
    case millisecondsSince1970
}

/// Formatters for custom date formats, made once per import or export run (a
/// `DateFormatter` is expensive to make and not to be shared between threads).
final class DateFormatters {
    private var formatters: [DateFormat: DateFormatter] = [:]

    func formatter(_ pattern: String, timeZone: TimeZone) -> DateFormatter {
        let key = DateFormat.custom(pattern, timeZone: timeZone)
        if let existing = formatters[key] { return existing }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = timeZone
        formatter.dateFormat = pattern
        formatters[key] = formatter
        return formatter
    }

    /// A date read from a record's value, or `nil` when it does not fit the format.
    func date(from value: JSONValue, format: DateFormat) -> Date? {
        switch (format, value) {
        case (.iso8601, .string(let text)): return ISO8601.date(from: text)
        case (.custom(let pattern, let timeZone), .string(let text)):
            return formatter(pattern, timeZone: timeZone).date(from: text)
        case (.secondsSince1970, .number(let seconds)) where seconds.isFinite:
            return Date(timeIntervalSince1970: seconds)
        case (.millisecondsSince1970, .number(let milliseconds)) where milliseconds.isFinite:
            return Date(timeIntervalSince1970: milliseconds / 1000)
        default: return nil
        }
    }

    /// A date written for export.
    func value(of date: Date, format: DateFormat) -> JSONValue {
        switch format {
        case .iso8601: return .string(ISO8601.string(from: date))
        case .custom(let pattern, let timeZone): return .string(formatter(pattern, timeZone: timeZone).string(from: date))
        case .secondsSince1970: return .number(date.timeIntervalSince1970)
        case .millisecondsSince1970: return .number((date.timeIntervalSince1970 * 1000).rounded())
        }
    }
}

/// ISO 8601 date-times, read and written without a formatter: exact to the
/// microsecond, whatever the number of fractional digits.
enum ISO8601 {
    /// Reads `YYYY-MM-DD`, optionally followed by `T` (or a space) and `HH:MM[:SS[.fff…]]`
    /// and a zone (`Z`, `±HH`, `±HHMM`, `±HH:MM`); UTC when no zone is given.
    static func date(from text: String) -> Date? {
        var scanner = Scanner(Array(text.utf8))
        guard let year = scanner.number(digits: 4), scanner.skip("-"), let month = scanner.number(digits: 2),
            scanner.skip("-"), let day = scanner.number(digits: 2), (1...12).contains(month),
            (1...daysIn(month: month, year: year)).contains(day)
        else { return nil }
        var seconds = Double(TimestampText.days(year: Int64(year), month: Int64(month), day: Int64(day))) * 86_400
        guard !scanner.atEnd else { return Date(timeIntervalSince1970: seconds) }
        guard scanner.skip("T") || scanner.skip("t") || scanner.skip(" "), let hour = scanner.number(digits: 2),
            scanner.skip(":"), let minute = scanner.number(digits: 2), hour <= 24, minute <= 59
        else { return nil }
        var second = 0
        var fraction = 0.0
        if scanner.skip(":") {
            guard let value = scanner.number(digits: 2), value <= 60 else { return nil }
            second = value
            if scanner.skip(".") || scanner.skip(",") {
                var scale = 0.1
                var digits = 0
                while let digit = scanner.digit() {
                    fraction += Double(digit) * scale
                    scale /= 10
                    digits += 1
                }
                guard digits > 0 else { return nil }
            }
        }
        guard hour < 24 || (minute == 0 && second == 0 && fraction == 0) else { return nil }
        seconds += Double(hour * 3600 + minute * 60 + second)
        if scanner.skip("Z") || scanner.skip("z") {
            // UTC
        } else if let sign = scanner.sign() {
            guard let offsetHours = scanner.number(digits: 2), offsetHours <= 23 else { return nil }
            var offsetMinutes = 0
            if scanner.skip(":") {
                guard let value = scanner.number(digits: 2) else { return nil }
                offsetMinutes = value
            } else if let value = scanner.number(digits: 2) {
                offsetMinutes = value
            }
            guard offsetMinutes <= 59 else { return nil }
            seconds -= Double(sign * (offsetHours * 3600 + offsetMinutes * 60))
        }
        guard scanner.atEnd else { return nil }
        // Whole seconds and the fraction are added last, rounded to the microsecond, so
        // that the fraction is not swamped by the size of the seconds.
        return Date(timeIntervalSince1970: seconds + (fraction * 1_000_000).rounded() / 1_000_000)
    }

    /// `2024-12-24T18:30:00Z`, with the fraction to the microsecond when there is one
    /// (`…:00.25Z`).
    static func string(from date: Date) -> String {
        let total = date.timeIntervalSince1970
        var whole = total.rounded(.down)
        var micros = ((total - whole) * 1_000_000).rounded()
        if micros >= 1_000_000 {
            whole += 1
            micros = 0
        }
        let seconds = Int64(whole)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = Int(seconds - days * 86_400)
        let civil = TimestampText.civil(fromDays: days)
        let (year, month, day) = (Int(civil.year), Int(civil.month), Int(civil.day))
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        var text = (year < 0 ? "-" + pad(-year, 4) : pad(year, 4)) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T"
            + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
        if micros > 0 {
            var fraction = pad(Int(micros), 6)
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text + "Z"
    }

    private static func isLeap(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Reads ASCII bytes left to right.
    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { position == bytes.count }

        mutating func skip(_ character: Unicode.Scalar) -> Bool {
            guard position < bytes.count, bytes[position] == UInt8(ascii: character) else { return false }
            position += 1
            return true
        }

        mutating func digit() -> Int? {
            guard position < bytes.count, bytes[position] >= 48, bytes[position] <= 57 else { return nil }
            position += 1
            return Int(bytes[position - 1] - 48)
        }

        mutating func number(digits: Int) -> Int? {
            let start = position
            var value = 0
            for _ in 0..<digits {
                guard let digit = digit() else {
                    position = start
                    return nil
                }
                value = value * 10 + digit
            }
            return value
        }

        mutating func sign() -> Int? {
            if skip("+") { return 1 }
            if skip("-") { return -1 }
            return nil
        }
    }
}
