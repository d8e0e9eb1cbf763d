import ConfabProtocol

/// The name a client offers in `hello`, shown beside every message it sends and in every
/// client list. Another user on the socket chooses it, so it may not pass for the model, the
/// system prompt, a tool or the daemon, nor hold characters that make it look like something
/// else on a terminal: controls (a line break forges a line, ESC drives the terminal), the
/// Unicode format characters (the bidi embeddings, overrides and isolates U+202A–U+202E and
/// U+2066–U+2069 reorder what follows; zero-width ones hide inside a reserved word) and the
/// line and paragraph separators. Nor may it push the login shown beside it out of sight or
/// make a line megabytes long: it is at most `maxBytes` of UTF-8, holds no characters drawn as
/// nothing (the default-ignorable code points, among them the Hangul fillers, and the blank
/// braille pattern), no white space but single spaces between words, and at most
/// `maxMarksPerBase` combining marks on one character.
enum DisplayName {
    static let maxBytes = 128
    static let maxMarksPerBase = 2
    /// The length a program name (`hello`'s `client`) is cut to.
    static let maxProgramBytes = 64
    /// Compared without case, around white space and a trailing colon.
    static let reserved: Set<String> = Set(Role.allCases.filter { $0 != .user }.map(\.rawValue)) .union(["confabd", "confab", "owner"])

    /// Why `name` cannot be a display name, or nil when it can.
    static func problem(_ name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= maxBytes else { return "must be 1 to \(maxBytes) bytes of UTF-8" }
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
        var marksOnBase = 0
        var previous: Unicode.Scalar?
        for scalar in text.unicodeScalars {
            defer { previous = scalar }
            let category = scalar.properties.generalCategory
            if category == .nonspacingMark || category == .enclosingMark {
                marksOnBase += 1
                if marksOnBase > maxMarksPerBase { return "must not hold more than \(maxMarksPerBase) combining marks on one character (\(code(scalar)) is one too many)" }
                // The emoji and text variation selectors are marks drawn as nothing: counted, allowed.
                if (0xFE00...0xFE0F).contains(scalar.value) { continue }
            } else {
                marksOnBase = 0
            }
            if isRefused(scalar) {
                return "must not hold control, format (bidi, zero-width) or separator characters (it holds \(code(scalar)))"
            }
            if isBlank(scalar) { return "must not hold characters drawn as nothing (it holds \(code(scalar)))" }
            if scalar == " " {
                if previous == nil || previous == " " { return "must not begin with a space or hold two in a row" }
            } else if scalar.properties.isWhitespace {
                return "must not hold white space other than single spaces (it holds \(code(scalar)))"
            }
        }
        if previous == " " { return "must not end with a space" }
        return nil
    }

    /// Why `name` cannot be an attachment's file name, or nil when it can: one path component
    /// (no `/`, not `.` or `..`) of 1 to `AttachmentLimits.maxNameBytes` bytes, without the
    /// characters a display name may not hold either (controls, format characters, line and
    /// paragraph separators, characters drawn as nothing). Spaces are a file name's own.
    static func fileNameProblem(_ name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= AttachmentLimits.maxNameBytes else {
            return "must be 1 to \(AttachmentLimits.maxNameBytes) bytes of UTF-8"
        }
        guard !name.contains("/"), name != ".", name != ".." else { return "must be a file's name alone, not a path" }
        for scalar in name.unicodeScalars {
            if isRefused(scalar) {
                return "must not hold control, format (bidi, zero-width) or separator characters (it holds \(code(scalar)))"
            }
            if isBlank(scalar) { return "must not hold characters drawn as nothing (it holds \(code(scalar)))" }
        }
        return nil
    }

    /// Cut to `maxProgramBytes` of UTF-8, on a character's edge.
    static func programName(_ program: String) -> String {
        var kept = ""
        for character in program {
            guard kept.utf8.count + character.utf8.count <= maxProgramBytes else { break }
            kept.append(character)
        }
        return kept
    }

    private static func code(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    private static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    /// Drawn as nothing, or as a blank cell, on a terminal: the default-ignorable code points
    /// (U+115F, U+1160, U+3164 and U+FFA0, the Hangul fillers, are letters of that kind) and
    /// U+2800, the blank braille pattern, a symbol.
    private static func isBlank(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isDefaultIgnorableCodePoint || scalar.value == 0x2800
    }
}
