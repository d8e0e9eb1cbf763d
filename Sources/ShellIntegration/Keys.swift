/// The shells `confab shell-init` writes a snippet for.
public enum Shell: String, CaseIterable, Sendable {
    case bash, zsh, fish
}

/// A key as the user names it on the command line (`alt-a`, `ctrl-x`, `ctrl-alt-x`), and how
/// each shell's binding command spells it.
public struct Key: Equatable, Sendable, CustomStringConvertible {
    public let control: Bool
    public let alt: Bool
    /// A letter (for Alt, upper case means Alt-Shift) or a digit (Alt only).
    public let character: Character

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Control keys the terminal or the line editor needs for itself.
    private static let reservedControl: Set<Character> = ["c", "d", "g", "h", "i", "j", "m", "q", "s", "z"]

    public init(parsing text: String) throws(ParseError) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        let usage = "a key is written alt-LETTER, ctrl-LETTER or ctrl-alt-LETTER (e.g. alt-a, ctrl-x); got \"\(text)\""
        guard parts.count >= 2, let last = parts.last, last.count == 1, let character = last.first else {
            throw ParseError(description: usage)
        }
        var control = false, alt = false
        for modifier in parts.dropLast() {
            switch modifier.lowercased() {
            case "ctrl", "control", "c": if control { throw ParseError(description: usage) }; control = true
            case "alt", "meta", "m": if alt { throw ParseError(description: usage) }; alt = true
            default: throw ParseError(description: usage)
            }
        }
        guard character.isASCII, character.isLetter || character.isNumber else { throw ParseError(description: usage) }
        if control {
            guard character.isLetter else { throw ParseError(description: "ctrl- goes with a letter; got \"\(text)\"") }
            let lower = Character(character.lowercased())
            if !alt, Self.reservedControl.contains(lower) {
                throw ParseError(description: "\(text) is taken by the terminal or the line editor (interrupt, end of input, Tab, Enter, …); choose another key")
            }
            self.character = lower
        } else {
            self.character = character
        }
        self.control = control
        self.alt = alt
    }

    public var description: String {
        (control ? "ctrl-" : "") + (alt ? "alt-" : "") + String(character)
    }

    /// The key sequence in the notation of the shell's binding command (`bind`, `bindkey`, fish's `bind`).
    public func sequence(for shell: Shell) -> String {
        let letter = String(character)
        switch shell {
        case .bash:
            return (alt ? "\\e" : "") + (control ? "\\C-" + letter : letter)
        case .zsh:
            return (alt ? "^[" : "") + (control ? "^" + letter.uppercased() : letter)
        case .fish:
            return (alt ? "\\e" : "") + (control ? "\\c" + letter : letter)
        }
    }

    public static let defaultCommand = Key(control: false, alt: true, character: "a")
    public static let defaultExplain = Key(control: false, alt: true, character: "e")

    private init(control: Bool, alt: Bool, character: Character) {
        self.control = control
        self.alt = alt
        self.character = character
    }
}
