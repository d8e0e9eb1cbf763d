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
        return value >= 0x7F && value <= 0x9F
    }

    /// The stand-in for one control character.
    static func visible(_ scalar: Unicode.Scalar) -> String {
        switch scalar.value {
        case 0x0D: return ""
        case 0x7F: return "^?"
        case 0x80...0x9F: return "M-" + caret(scalar.value - 0x80)
        default: return caret(scalar.value)
        }
    }

    /// `^@` … `^_` for 0x00 … 0x1F.
    private static func caret(_ value: UInt32) -> String {
        "^" + String(Unicode.Scalar(UInt8(value) + 0x40))
    }

    /// One line of text: as `sanitized`, and a newline or tab becomes a space too (for
    /// titles, names and other text that must stay on its line).
    public static func singleLine(_ text: String) -> String {
        guard mayNeedReplacing(text, orBreaks: true) else { return text }
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
    /// `singleLine`) changes: a byte below 0x20, DEL, or 0xC2, which leads U+0080…U+00BF
    /// (the C1 controls among them). Bytes are cheaper to scan than code points, and a
    /// listing checks every title it prints.
    private static func mayNeedReplacing(_ text: String, orBreaks: Bool) -> Bool {
        text.utf8.contains { byte in
            if byte < 0x20 { return orBreaks || (byte != 0x0A && byte != 0x09) }
            return byte == 0x7F || byte == 0xC2
        }
    }
}
