import ConfabProtocol

/// The name a client offers in `hello`, shown beside every message it sends and in every
/// client list. Another user on the socket chooses it, so it may not pass for the model, the
/// system prompt, a tool or the daemon, nor hold characters that make it look like something
/// else on a terminal: controls (a line break forges a line, ESC drives the terminal), the
/// Unicode format characters (the bidi embeddings, overrides and isolates U+202A–U+202E and
/// U+2066–U+2069 reorder what follows; zero-width ones hide inside a reserved word) and the
/// line and paragraph separators. The login from the kernel is shown beside it anyway.
enum DisplayName {
    static let maxCharacters = 64
    /// Compared without case, around white space and a trailing colon.
    static let reserved: Set<String> = Set(Role.allCases.filter { $0 != .user }.map(\.rawValue)) .union(["confabd", "confab", "owner"])

    /// Why `name` cannot be a display name, or nil when it can.
    static func problem(_ name: String) -> String? {
        guard !name.isEmpty, name.count <= maxCharacters else { return "must be 1 to \(maxCharacters) characters" }
        if let problem = characterProblem(name) { return problem }
        var folded = Substring(name.lowercased())
        while let last = folded.last, last.isWhitespace || last == ":" { folded = folded.dropLast() }
        while let first = folded.first, first.isWhitespace { folded = folded.dropFirst() }
        if reserved.contains(String(folded)) {
            return "must not be \(JSON.string(name).text): that name stands for \(folded == "confabd" || folded == "confab" ? "the daemon" : folded == "owner" ? "the owner" : "a role") in every transcript"
        }
        return nil
    }

    /// Why `text` cannot be shown to others as a name (of a person or of a program), or nil.
    static func characterProblem(_ text: String) -> String? {
        guard let bad = text.unicodeScalars.first(where: isRefused) else { return nil }
        let code = String(bad.value, radix: 16, uppercase: true)
        return "must not hold control, format (bidi, zero-width) or separator characters (it holds U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code))"
    }

    private static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }
}
