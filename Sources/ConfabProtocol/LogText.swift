/// Text bound for a log line, made harmless: what confabd's log and confab-web's log both
/// write, so that nothing a client, a model, a page or a header chose can end a line early
/// (the journal also ends a line at NUL, and a `<N>` after it would forge a priority) or
/// drive the terminal of whoever reads the log.
public enum LogText {
    /// `text` as one harmless line: `\n`, `\r`, `\t` for those, `\xHH` for the other C0
    /// controls (NUL and ESC among them) and DEL, `\u{HHHH}` for the C1 controls, the bidi
    /// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) and U+2028/U+2029.
    public static func escapingControls(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 }) else { return text }
        var out = String.UnicodeScalarView()
        func append(_ escape: String) { out.append(contentsOf: escape.unicodeScalars) }
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            case 0x00..<0x20, 0x7F: append("\\x" + hex(scalar.value, digits: 2))
            case 0x80...0x9F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: append("\\u{" + hex(scalar.value, digits: 4) + "}")
            default: out.append(scalar)
            }
        }
        return String(out)
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

/// How a person is named to others: a display name is chosen by whoever connects, so the
/// login the kernel vouches for stands beside it (`Build Bot (bob)`) unless the name already
/// starts with it (the default `bob@pts/3`, or `bob` itself). The terminal and the pages
/// both name people this way.
public enum PersonName {
    public static func shown(name: String, login: String) -> String {
        if name.isEmpty { return login }
        if login.isEmpty || name == login || name.hasPrefix(login + "@") { return name }
        return "\(name) (\(login))"
    }
}

extension String {
    /// Without white space or line breaks at either end (a key file usually ends in a newline;
    /// a model's summary often does).
    public var trimmingWhitespace: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last])
    }
}
