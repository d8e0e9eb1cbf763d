/// Every way text can end a line, made "\n", before anything counts lines or lays them out.
///
/// CommonMark ends a line at CR, LF or CR LF, while other code splits at LF alone; a text
/// holding a lone CR is then two different texts to the two, and a block can vanish or
/// swap places with another. So a model's reply passes here first, identically whether it
/// streams in pieces (`Normalizer`) or comes whole (`normalized`): CR LF, a lone CR, NEL
/// (U+0085), LINE SEPARATOR (U+2028) and PARAGRAPH SEPARATOR (U+2029) each become one LF.
public enum LineBreaks {
    public static func normalized(_ text: String) -> String {
        var normalizer = Normalizer()
        return normalizer.feed(text) + normalizer.finish()
    }

    static func isBreak(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x0D, 0x85, 0x2028, 0x2029: return true
        default: return false
        }
    }

    /// The same for text arriving in pieces: a CR at a piece's end is held back until the next
    /// piece says whether an LF follows it (CR LF is one break, not two).
    public struct Normalizer {
        private var heldCarriageReturn = false

        public init() {}

        public mutating func feed(_ piece: String) -> String {
            // Nearly every piece has none of these: hand it back untouched.
            // (0xC2 and 0xE2 lead NEL and the separators, and also much typography: those
            // pieces are looked at by code point before anything is rebuilt.)
            guard heldCarriageReturn || piece.utf8.contains(where: { $0 == 0x0D || $0 == 0xC2 || $0 == 0xE2 }),
                  heldCarriageReturn || piece.unicodeScalars.contains(where: LineBreaks.isBreak) else { return piece }
            var out = String.UnicodeScalarView()
            for scalar in piece.unicodeScalars {
                if heldCarriageReturn {
                    heldCarriageReturn = false
                    out.append("\n")
                    // The LF of a CR LF: its break is the one just written.
                    if scalar == "\n" { continue }
                }
                if scalar == "\r" {
                    heldCarriageReturn = true
                } else if isBreak(scalar) {
                    out.append("\n")
                } else {
                    out.append(scalar)
                }
            }
            return String(out)
        }

        /// The end of the text: a CR held back is a break after all.
        public mutating func finish() -> String {
            defer { heldCarriageReturn = false }
            return heldCarriageReturn ? "\n" : ""
        }
    }
}
