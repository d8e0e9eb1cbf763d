/// Text from the model or from other people, made safe to print on a terminal.
///
/// Anything a terminal would act on instead of showing is replaced by a visible stand-in,
/// so that nobody but confab itself can move the cursor, recolour text, retitle a window
/// or write the clipboard (OSC 52): C0 controls other than newline and tab (`^[` for ESC,
/// `^G` for BEL, …), DEL (`^?`), and C1 controls U+0080…U+009F as decoded code points
/// (`M-^[` for CSI, as `cat -v` writes them). A carriage return is dropped: shown, it would
/// litter every CRLF line end; obeyed, it would let a reply overwrite what came before.
/// Input is a decoded `String`, so a C1 control is a code point, never a stray byte of
/// some other character's UTF-8.
///
/// The characters that reorder or break text without showing themselves are made visible
/// too, as `<U+202E>`: the bidirectional embeddings, overrides and isolates (U+202A…U+202E,
/// U+2066…U+2069), which can make a name or a message show its end first or hide what
/// follows among its own words; the invisible direction marks (U+200E, U+200F, U+061C),
/// which move the punctuation and digits around them; and LINE and PARAGRAPH SEPARATOR
/// (U+2028, U+2029), which some terminals take as a line end that confab did not count.
/// (A reply's own line breaks are made "\n" before this, by `LineBreaks`.)
public enum SafeText {
    public static func sanitized(_ text: String) -> String {
        // Nearly all text is clean: hand it back untouched without building a copy.
        guard mayNeedReplacing(text, orBreaks: false), text.unicodeScalars.contains(where: needsReplacing) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if needsReplacing(scalar) {
                result.append(contentsOf: visible(scalar).unicodeScalars)
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }

    public static func needsReplacing(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        if value < 0x20 { return value != 0x0A && value != 0x09 }
        if value <= 0x9F { return value >= 0x7F }
        return isInvisibleFormat(value)
    }

    /// The bidirectional controls and marks, and the line and paragraph separators.
    static func isInvisibleFormat(_ value: UInt32) -> Bool {
        switch value {
        case 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    /// The stand-in for one control character.
    static func visible(_ scalar: Unicode.Scalar) -> String {
        switch scalar.value {
        case 0x0D: return ""
        case 0x7F: return "^?"
        case 0x80...0x9F: return "M-" + caret(scalar.value - 0x80)
        case 0x20...: return "<U+" + hex(scalar.value) + ">"
        default: return caret(scalar.value)
        }
    }

    /// At least four upper-case hexadecimal digits.
    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// `^@` … `^_` for 0x00 … 0x1F.
    private static func caret(_ value: UInt32) -> String {
        "^" + String(Unicode.Scalar(UInt8(value) + 0x40))
    }

    /// One line of text: as `sanitized`, and a newline or tab becomes a space too (for
    /// titles, names and other text that must stay on its line).
    public static func singleLine(_ text: String) -> String {
        guard mayNeedReplacing(text, orBreaks: true),
              text.unicodeScalars.contains(where: { $0 == "\n" || $0 == "\t" || needsReplacing($0) }) else { return text }
        // One pass over code points: a newline or a tab is a grapheme of its own, so
        // replacing it here is the same as replacing the character.
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar == "\n" || scalar == "\t" {
                result.append(" ")
            } else if needsReplacing(scalar) {
                result.append(contentsOf: visible(scalar).unicodeScalars)
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }

    /// False when no byte of `text` can start anything `sanitized` (or, with `orBreaks`,
    /// `singleLine`) changes: a byte below 0x20, DEL, 0xC2, which leads U+0080…U+00BF
    /// (the C1 controls among them), 0xD8, which leads U+0600…U+063F (U+061C), or 0xE2,
    /// which leads U+2000…U+2FFF (the marks, separators and bidi controls). Bytes are
    /// cheaper to scan than code points, and a listing checks every title it prints.
    private static func mayNeedReplacing(_ text: String, orBreaks: Bool) -> Bool {
        text.utf8.contains { byte in
            if byte < 0x20 { return orBreaks || (byte != 0x0A && byte != 0x09) }
            return byte == 0x7F || byte == 0xC2 || byte == 0xD8 || byte == 0xE2
        }
    }
}
