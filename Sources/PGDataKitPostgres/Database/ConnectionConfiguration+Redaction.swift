import Foundation

extension ConnectionConfiguration: CustomDebugStringConvertible, CustomReflectable {
    /// `ConnectionConfiguration(user@host:port/database)`, without the password.
    public var debugDescription: String { "ConnectionConfiguration(\(description))" }

    /// What `dump` and debuggers show: the connection string and overrides with every
    /// password replaced by `***`.
    public var customMirror: Mirror {
        var shownOverrides = overrides
        if shownOverrides["password"] != nil { shownOverrides["password"] = "***" }
        return Mirror(
            self,
            children: ["connectionString": redacting(connectionString), "overrides": shownOverrides],
            displayStyle: .struct)
    }

    /// Why libpq must not see the string, or `nil`: a URL whose scheme is not exactly
    /// `postgres://` or `postgresql://`. libpq would take such a URL for a database name
    /// or a malformed `key=value` string and quote it — password included — in its
    /// error message.
    var schemeProblem: String? {
        if connectionString.hasPrefix("postgres://") || connectionString.hasPrefix("postgresql://") { return nil }
        guard let scheme = urlScheme else { return nil }
        return "unsupported connection URL scheme \"\(scheme)\": use a postgres:// or postgresql:// URL "
            + "(lower case, no leading spaces) or a libpq key=value string"
    }

    /// The scheme, when the string looks like a URL (`letters:` before any `=` or
    /// space); `nil` for a `key=value` string or a bare database name.
    private var urlScheme: Substring? {
        let trimmed = connectionString.drop { $0.isWhitespace }
        guard let colon = trimmed.firstIndex(of: ":") else { return nil }
        let scheme = trimmed[..<colon]
        guard let first = scheme.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic,
            scheme.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic
                || ("0"..."9").contains($0) || $0 == "+" || $0 == "-" || $0 == ".") })
        else { return nil }
        return scheme
    }

    /// Replaces every password this configuration holds (as written, percent-decoded,
    /// and from overrides) and the password part of any `scheme://user:password@` in
    /// `text` with `***`. libpq quotes the connection string in some parse errors, so
    /// connection-time messages pass through here before they reach an error.
    func redacting(_ text: String) -> String {
        var result = text
        for secret in secrets().sorted(by: { $0.count > $1.count }) {
            result = result.replacingOccurrences(of: secret, with: "***")
        }
        return Self.redactingURLPasswords(result)
    }

    /// The password texts found in the string and the overrides.
    private func secrets() -> Set<String> {
        var found: Set<String> = []
        func add(_ secret: Substring) {
            guard !secret.isEmpty else { return }
            found.insert(String(secret))
            if let decoded = secret.removingPercentEncoding, !decoded.isEmpty { found.insert(decoded) }
        }
        if let password = overrides["password"] { add(Substring(password)) }
        let string = connectionString
        // URL userinfo: libpq's reading (up to the first '@' or '/') and the widest one
        // (up to the last '@').
        let afterScheme = string.range(of: "://")?.upperBound
            ?? urlScheme.map { string.index(after: $0.endIndex) }
        if let afterScheme {
            let rest = string[afterScheme...].drop { $0 == "/" }
            var userinfos: [Substring] = []
            if let stop = rest.firstIndex(where: { $0 == "@" || $0 == "/" }), rest[stop] == "@" {
                userinfos.append(rest[..<stop])
            }
            if let last = rest.lastIndex(of: "@") { userinfos.append(rest[..<last]) }
            for userinfo in userinfos {
                if let colon = userinfo.firstIndex(of: ":") { add(userinfo[userinfo.index(after: colon)...]) }
            }
        }
        // `password=` as a URL query parameter or a key=value pair.
        var searchStart = string.startIndex
        while let keyword = string.range(of: "password", range: searchStart..<string.endIndex) {
            searchStart = keyword.upperBound
            var cursor = keyword.upperBound
            while cursor < string.endIndex, string[cursor] == " " { cursor = string.index(after: cursor) }
            guard cursor < string.endIndex, string[cursor] == "=" else { continue }
            cursor = string.index(after: cursor)
            while cursor < string.endIndex, string[cursor] == " " { cursor = string.index(after: cursor) }
            if cursor < string.endIndex, string[cursor] == "'" {
                let valueStart = string.index(after: cursor)
                var end = valueStart
                while end < string.endIndex, string[end] != "'" {
                    end = string[end] == "\\" && string.index(after: end) < string.endIndex
                        ? string.index(end, offsetBy: 2) : string.index(after: end)
                }
                add(string[valueStart..<min(end, string.endIndex)])
                add(string[valueStart..<min(end, string.endIndex)].replacingOccurrences(of: "\\", with: "")[...])
            } else {
                let end = string[cursor...].firstIndex { $0 == "&" || $0 == "#" || $0.isWhitespace } ?? string.endIndex
                add(string[cursor..<end])
            }
        }
        if schemeProblem == nil, let password = parameters()?["password"] { add(Substring(password)) }
        return found
    }

    /// `scheme://user:password@` → `scheme://user:***@` wherever a URL appears in text.
    static func redactingURLPasswords(_ text: String) -> String {
        var result = ""
        var rest = Substring(text)
        while let separator = rest.range(of: "://") {
            result += rest[..<separator.upperBound]
            rest = rest[separator.upperBound...]
            // The URL runs to whitespace or a quote; its userinfo to the last '@' in it.
            let urlEnd = rest.firstIndex { $0.isWhitespace || $0 == "\"" || $0 == "'" } ?? rest.endIndex
            let url = rest[..<urlEnd]
            if let at = url.lastIndex(of: "@"), let colon = url[..<at].firstIndex(of: ":") {
                result += String(url[...colon]) + "***"
                rest = rest[at...]
            }
        }
        return result + rest
    }
}
