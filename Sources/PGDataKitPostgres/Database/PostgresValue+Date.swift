import Foundation

extension Date: PostgresCodable {
    /// Sent as `timestamp with time zone`.
    public static var postgresType: PostgresType { .timestamptz }

    /// ISO 8601 in UTC with microseconds, such as `2024-05-01 12:00:00.250000+00`, so
    /// the server stores the same instant whatever its session time zone.
    ///
    /// - Throws: `PostgresValueError` for a date that is not finite or lies outside
    ///   what `timestamptz` stores (4714-11-24 BC to 294276-12-31 AD, UTC).
    public func postgresText() throws -> String? {
        let seconds = timeIntervalSince1970
        guard seconds.isFinite else {
            throw PostgresValueError(code: .unencodable, swiftType: "Date", reason: "not a finite date")
        }
        var whole = seconds.rounded(.down)
        var micros = ((seconds - whole) * 1_000_000).rounded()
        if micros >= 1_000_000 {
            whole += 1
            micros -= 1_000_000
        }
        guard whole >= Double(TimestampText.firstSecond), whole < Double(TimestampText.endSecond) else {
            throw PostgresValueError(
                code: .unencodable, swiftType: "Date",
                reason: "the date lies outside PostgreSQL's timestamptz range (4714-11-24 BC to 294276-12-31 AD)")
        }
        return TimestampText.format(secondsSince1970: Int64(whole), microseconds: Int64(micros))
    }

    /// Reads `timestamptz` (any offset the session uses), `timestamp` (as UTC) and
    /// `date` (midnight UTC); `infinity` reads as `distantFuture`, `-infinity` as
    /// `distantPast`.
    public static func decode(from cell: PostgresCell) throws -> Date {
        let bytes = try cell.requireBytes(for: Date.self)
        guard let (days, micros) = TimestampText.parseDays(bytes) else {
            let text = String(decoding: bytes, as: UTF8.self)
            if text == "infinity" { return .distantFuture }
            if text == "-infinity" { return .distantPast }
            throw cell.invalid(for: Date.self)
        }
        if let total = TimestampText.microseconds(days: days, micros: micros) {
            return Date(timeIntervalSince1970: Double(total) / 1_000_000)
        }
        // Beyond ±292,277 years (a `date` column reaches 5874897 AD): days and the rest
        // apart, as Int64 microseconds would overflow.
        return Date(timeIntervalSince1970: Double(days) * 86_400 + Double(micros) / 1_000_000)
    }
}

/// Conversion between microseconds since 1970 and PostgreSQL's ISO timestamp text.
package enum TimestampText {
    /// Days since 1970-01-01 to a proleptic Gregorian civil date (Hinnant's algorithm).
    package static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPrime = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
        let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// A proleptic Gregorian civil date to days since 1970-01-01.
    package static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The first second `timestamptz` stores: 4714-11-24 00:00:00 BC, UTC.
    static let firstSecond: Int64 = -210_866_803_200
    /// The second after the last one `timestamptz` stores: 294277-01-01 00:00:00, UTC.
    static let endSecond: Int64 = 9_224_318_016_000

    static func format(microsecondsSince1970 micros: Int64) -> String {
        var seconds = micros / 1_000_000
        var rest = micros % 1_000_000
        if rest < 0 {
            rest += 1_000_000
            seconds -= 1
        }
        return format(secondsSince1970: seconds, microseconds: rest)
    }

    /// Formats whole seconds and 0–999,999 microseconds (kept apart: the last instants
    /// PostgreSQL stores lie beyond Int64 microseconds since 1970).
    static func format(secondsSince1970 seconds: Int64, microseconds fraction: Int64) -> String {
        var days = seconds / 86_400
        var rest = seconds % 86_400
        if rest < 0 {
            rest += 86_400
            days -= 1
        }
        let (year, month, day) = civil(fromDays: days)
        let hour = rest / 3600
        let minute = rest / 60 % 60
        let second = rest % 60
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
        }
        let era = year <= 0 ? " BC" : ""
        let shownYear = year <= 0 ? 1 - year : year
        return "\(pad(shownYear, 4))-\(pad(month, 2))-\(pad(day, 2)) \(pad(hour, 2)):"
            + "\(pad(minute, 2)):\(pad(second, 2)).\(pad(fraction, 6))+00\(era)"
    }

    /// Parses `YYYY-MM-DD[ HH:MM:SS[.ffffff]][±HH[:MM[:SS]]][ BC]` to microseconds since
    /// 1970; `nil` if malformed or beyond Int64 microseconds.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        parseDays(bytes).flatMap { microseconds(days: $0.days, micros: $0.micros) }
    }

    /// `days × 86,400,000,000 + micros`, or `nil` on overflow.
    static func microseconds(days: Int64, micros: Int64) -> Int64? {
        let (dayMicros, overflow) = days.multipliedReportingOverflow(by: 86_400_000_000)
        let (total, overflow2) = dayMicros.addingReportingOverflow(micros)
        return overflow || overflow2 ? nil : total
    }

    /// Parses the same text to days since 1970 and microseconds from that midnight UTC
    /// (the time minus its offset, so possibly negative or past a day); `nil` if
    /// malformed. Years have at most seven digits (PostgreSQL's dates end in 5874897).
    static func parseDays(_ bytes: UnsafeBufferPointer<UInt8>) -> (days: Int64, micros: Int64)? {
        var index = 0
        func number(maxDigits: Int = 12) -> Int64? {
            var value: Int64 = 0
            var count = 0
            while index < bytes.count, count < maxDigits {
                let digit = bytes[index] &- UInt8(ascii: "0")
                guard digit < 10 else { break }
                value = value * 10 + Int64(digit)
                index += 1
                count += 1
            }
            return count > 0 ? value : nil
        }
        func expect(_ character: Character) -> Bool {
            guard index < bytes.count, let ascii = character.asciiValue, bytes[index] == ascii else {
                return false
            }
            index += 1
            return true
        }
        guard var year = number(maxDigits: 7), expect("-"), let month = number(maxDigits: 2), expect("-"),
            let day = number(maxDigits: 2), (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        var micros: Int64 = 0
        if expect(" ") || expect("T") {
            if index < bytes.count, bytes[index] == UInt8(ascii: "B") {
                index -= 1  // a date followed by " BC"
            } else {
                guard let hour = number(maxDigits: 2), expect(":"),
                    let minute = number(maxDigits: 2), expect(":"),
                    let second = number(maxDigits: 2)
                else { return nil }
                micros = ((hour * 60 + minute) * 60 + second) * 1_000_000
                if expect(".") {
                    let start = index
                    guard var fraction = number(maxDigits: 6) else { return nil }
                    for _ in 0..<(6 - (index - start)) { fraction *= 10 }
                    micros += fraction
                    while index < bytes.count, bytes[index] &- UInt8(ascii: "0") < 10 { index += 1 }
                }
                if index < bytes.count,
                    bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")
                {
                    let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
                    index += 1
                    guard let offsetHours = number(maxDigits: 2) else { return nil }
                    var offset = offsetHours * 3600
                    if expect(":") {
                        guard let minutes = number(maxDigits: 2) else { return nil }
                        offset += minutes * 60
                        if expect(":") {
                            guard let seconds = number(maxDigits: 2) else { return nil }
                            offset += seconds
                        }
                    }
                    micros -= sign * offset * 1_000_000
                }
            }
        }
        if index < bytes.count {
            let rest = String(decoding: UnsafeBufferPointer(rebasing: bytes[index...]), as: UTF8.self)
            guard rest == " BC" else { return nil }
            year = 1 - year
            index = bytes.count
        }
        return (days(year: year, month: month, day: day), micros)
    }
}
