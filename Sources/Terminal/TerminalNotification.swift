/// A terminal's own desktop notification, as attach sends it when confab needs the person:
/// OSC 9 (iTerm2, WezTerm, kitty, Ghostty), OSC 777 (foot, urxvt, WezTerm) or the bell.
/// Inside tmux the OSC goes through tmux's passthrough (`ESC P tmux; … ESC \`, every ESC
/// in it doubled), which tmux hands on to the terminal it runs in when its
/// `allow-passthrough` option is on; the bell needs none.
///
/// The words are confab's own, with names from others (a conversation's title, a tool's
/// name) in them: every control character is taken out, as are the `;` that separate OSC
/// 777's fields, and the text is cut short, so that nothing a model or a person wrote can
/// end the sequence early or drive the terminal.
public enum TerminalNotification {
    public enum Kind: String, CaseIterable, Sendable {
        case osc9, osc777, bell, off
    }

    /// The kind chosen by `setting` (`CONFAB_NOTIFY`: `osc9`, `osc777`, `bell`, `off` or
    /// `auto`); `auto` (and no setting) picks by the terminal where it is known to take a
    /// notification, else `off`. Nil for a setting that is none of these.
    public static func kind(setting: String?, term: String?, termProgram: String?) -> Kind? {
        let setting = (setting ?? "auto").lowercased()
        if setting != "auto" { return Kind(rawValue: setting) }
        switch termProgram {
        case "iTerm.app", "WezTerm", "ghostty": return .osc9
        default: break
        }
        switch term {
        case "xterm-kitty", "xterm-ghostty": return .osc9
        case "foot", "foot-extra": return .osc777
        default: return .off
        }
    }

    /// The bytes that make the terminal notify: `title` and `body` made harmless.
    public static func sequence(_ kind: Kind, title: String, body: String, inTmux: Bool) -> String {
        let sequence: String
        switch kind {
        case .off: return ""
        case .bell: return "\u{07}"
        case .osc9: sequence = "\u{1B}]9;" + clean(title + ": " + body, limit: 200) + "\u{07}"
        case .osc777: sequence = "\u{1B}]777;notify;" + clean(title, limit: 60) + ";" + clean(body, limit: 200) + "\u{07}"
        }
        guard inTmux else { return sequence }
        return "\u{1B}Ptmux;" + sequence.replacing("\u{1B}", with: "\u{1B}\u{1B}") + "\u{1B}\\"
    }

    /// One line of printable text: control characters (C0, DEL, C1, and the line and
    /// paragraph separators and bidirectional controls `SafeText` names) and `;` become
    /// spaces, runs of spaces one, at most `limit` characters.
    public static func clean(_ text: String, limit: Int) -> String {
        var result = ""
        var lastWasSpace = true
        for scalar in text.unicodeScalars {
            let value = scalar.value
            let control = value < 0x20 || (0x7F...0x9F).contains(value) || value == 0x2028 || value == 0x2029
                || (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value) || value == 0x200E || value == 0x200F
                || value == 0x061C
            if control || scalar == ";" || scalar == " " {
                if !lastWasSpace { result.unicodeScalars.append(" ") }
                lastWasSpace = true
            } else {
                result.unicodeScalars.append(scalar)
                lastWasSpace = false
            }
        }
        while result.hasSuffix(" ") { result.removeLast() }
        return result.count > limit ? String(result.prefix(limit - 1)) + "…" : result
    }
}
