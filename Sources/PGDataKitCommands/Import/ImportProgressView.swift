import Foundation

/// The import command's progress on standard error (standard output keeps the summary):
/// on a terminal a bar redrawn in place with records/s and the time left; otherwise a
/// plain line every two seconds.
struct ImportProgressView {
    private let live: Bool
    private let quiet: Bool
    private let started = Date()
    private var lastLine = Date.distantPast

    init(quiet: Bool) {
        self.quiet = quiet
        self.live = !quiet && isatty(STDERR_FILENO) == 1
    }

    /// Shows `records` saved with `fraction` of the file read.
    mutating func show(records: Int64, fraction: Double) {
        guard !quiet else { return }
        let now = Date()
        if live {
            write("\r" + Self.bar(records: records, fraction: fraction, elapsed: now.timeIntervalSince(started)) + "\u{1B}[K")
        } else if now.timeIntervalSince(lastLine) >= 2 {
            lastLine = now
            write(Self.plain(records: records, fraction: fraction, elapsed: now.timeIntervalSince(started)) + "\n")
        }
    }

    /// Ends the bar's line (so that what follows starts on a line of its own).
    func end(records: Int64, fraction: Double) {
        guard live else { return }
        write("\r" + Self.bar(records: records, fraction: fraction, elapsed: Date().timeIntervalSince(started)) + "\u{1B}[K\n")
    }

    /// Writes a message on a line of its own, below the bar.
    func note(_ message: String) {
        guard !quiet else { return }
        write((live ? "\r\u{1B}[K" : "") + message + "\n")
    }

    var elapsed: Double { Date().timeIntervalSince(started) }

    /// `[##########··········]  50%  12000 records  6000 records/s  ETA 0:02`
    static func bar(records: Int64, fraction: Double, elapsed: Double) -> String {
        let width = 24
        let clamped = min(max(fraction, 0), 1)
        let filled = Int((clamped * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: "·", count: width - filled)
        return "[\(bar)] \(percent(clamped))  \(records) records  \(rate(records, elapsed))  ETA \(eta(clamped, elapsed))"
    }

    /// `12000 records saved, 50% of the file read, 6000 records/s, ETA 0:02`
    static func plain(records: Int64, fraction: Double, elapsed: Double) -> String {
        let clamped = min(max(fraction, 0), 1)
        return "\(records) records saved, \(Int((clamped * 100).rounded(.down)))% of the file read, \(rate(records, elapsed)), ETA \(eta(clamped, elapsed))"
    }

    private static func percent(_ fraction: Double) -> String {
        let text = "\(Int((fraction * 100).rounded(.down)))%"
        return String(repeating: " ", count: max(0, 4 - text.count)) + text
    }

    private static func rate(_ records: Int64, _ elapsed: Double) -> String {
        elapsed > 0 ? "\(Int(Double(records) / elapsed)) records/s" : "– records/s"
    }

    /// The time left at the rate so far, as m:ss (h:mm:ss past an hour).
    private static func eta(_ fraction: Double, _ elapsed: Double) -> String {
        guard fraction > 0, elapsed > 0 else { return "–" }
        let left = elapsed * (1 - fraction) / fraction
        guard left.isFinite, left < 360_000 else { return "–" }
        let seconds = Int(left.rounded(.up))
        let (hours, minutes) = (seconds / 3600, seconds % 3600 / 60)
        let rest = String(format: "%02d", seconds % 60)
        return hours > 0 ? "\(hours):\(String(format: "%02d", minutes)):\(rest)" : "\(minutes):\(rest)"
    }

    private func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
