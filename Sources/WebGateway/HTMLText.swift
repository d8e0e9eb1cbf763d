/// Text from anybody (a model, a tool, another participant) made into HTML that can only
/// ever be text: markup characters escaped, and control characters shown as the visible
/// symbols Unicode has for them rather than passed on, so an ESC from `&#27;` reads as ␛.
public enum HTMLText {
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\n", "\t": out.unicodeScalars.append(scalar)
            default:
                let value = scalar.value
                if value < 0x20 {
                    // U+2400…U+241F, the control pictures, one per C0 code.
                    out.unicodeScalars.append(Unicode.Scalar(0x2400 + value)!)
                } else if value == 0x7F {
                    out += "\u{2421}"
                } else if (0x80...0x9F).contains(value) {
                    out += "\\x" + String(value, radix: 16, uppercase: true)
                } else if isBidiControl(value) {
                    // Reordering controls could make text read otherwise than it is.
                    out += "&lt;U+" + String(value, radix: 16, uppercase: true) + "&gt;"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    private static func isBidiControl(_ value: UInt32) -> Bool {
        (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value)
    }
}
