/// What the key binding puts on the command line from a model's reply: only the command,
/// and only a command the person can see whole before pressing Enter.
public enum CommandReply {
    /// The command of `reply` as it may go onto the command line, or why it may not.
    ///
    /// A line editor shows a buffer of many lines as best it can: blank lines can push the
    /// first lines off the screen, a carriage return or an escape sequence can draw over them,
    /// a bidirectional override can make them read differently from what runs. So:
    /// - blank and whitespace-only lines are left out (they change nothing a shell runs);
    /// - a control character (C0 but line feed, DEL, C1), a format character (bidirectional
    ///   controls, zero-width characters) or a line or paragraph separator anywhere in the
    ///   command refuses it whole: nothing of it is inserted;
    /// - a command taller than the screen can show twice (the numbered listing above the
    ///   prompt and the buffer itself, see `ShellCommand.listing`) is refused too.
    /// A CR LF line end is a line end, not a control character.
    public static func checked(_ reply: String, screen: ScreenSize) throws(Refusal) -> ShellCommand {
        // By scalars: as Characters, CR LF is one grapheme that is not "\n".
        let lines = reply.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            String(line.last == "\r" ? line.dropLast() : line)
        }
        let kept = commandLines(in: lines).filter { !$0.trimmedWhitespace.isEmpty }
        guard !kept.isEmpty else { throw .noCommand }
        for (index, line) in kept.enumerated() {
            if let hidden = line.unicodeScalars.first(where: hidesText) {
                throw .hiddenCharacter(line: index + 1, scalar: hidden)
            }
        }
        var command = ShellCommand(lines: kept)
        // Trailing blanks of the last line: the cursor would sit after them, far from the text.
        command.lines[command.lines.count - 1] = kept[kept.count - 1].trimmingTrailingWhitespace
        let needed = command.rows(columns: screen.columns)
        let room = screen.rows - ShellCommand.reservedRows
        guard needed <= room else { throw .tooTall(lines: kept.count, rows: needed, room: max(0, room)) }
        return command
    }

    /// Whether `scalar` can hide or disguise what a line runs: controls (tab too: what it
    /// spans depends on the column), format characters and line or paragraph separators.
    static func hidesText(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned: return true
        default: return false
        }
    }

    /// Why the key put nothing on the command line.
    public enum Refusal: Error, Equatable, CustomStringConvertible {
        case noCommand
        case hiddenCharacter(line: Int, scalar: Unicode.Scalar)
        case tooTall(lines: Int, rows: Int, room: Int)

        public var description: String {
            switch self {
            case .noCommand:
                return "the reply held no command"
            case .hiddenCharacter(let line, let scalar):
                var code = String(scalar.value, radix: 16, uppercase: true)
                code = String(repeating: "0", count: max(0, 4 - code.count)) + code
                return "the reply's command holds U+\(code), an invisible or control character, on line \(line): "
                    + "nothing was put on the command line (what would run is not what would show)"
            case .tooTall(let lines, let rows, let room):
                return "the reply's command (\(lines) lines, \(rows) rows on this screen) is too long to check on the "
                    + "command line, which can show \(room): nothing was put there; read it in the conversation (confab attach)"
            }
        }
    }

    /// The command's lines in a reply's lines: the first fenced code block (an opening fence
    /// may carry a language; an unclosed one runs to the end), else the reply itself without
    /// an inline code span around it; `$ ` prompts stripped when every line has one.
    static func commandLines(in lines: [String]) -> [String] {
        if let block = firstFencedBlock(lines) { return stripPrompts(block) }
        var body = lines.joined(separator: "\n").trimmedWhitespace
        if let inner = wholeInlineCode(body) { body = inner }
        return stripPrompts(body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init))
    }

    /// The lines inside the first ``` or ~~~ fence (an opening fence may carry a language);
    /// an unclosed fence runs to the end of the reply.
    static func firstFencedBlock(_ lines: [String]) -> [String]? {
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let indent = line.prefix { $0 == " " }.count
            let rest = line.dropFirst(indent)
            if indent <= 3, let marker = rest.first, marker == "`" || marker == "~" {
                let fence = rest.prefix { $0 == marker }.count
                let info = rest.dropFirst(fence)
                // A backtick fence's info string cannot hold a backtick (CommonMark).
                if fence >= 3, marker == "~" || !info.contains("`") {
                    var body: [String] = []
                    var next = index + 1
                    while next < lines.count {
                        let candidate = lines[next]
                        let candidateIndent = candidate.prefix { $0 == " " }.count
                        let trimmed = candidate.dropFirst(candidateIndent)
                        let closing = trimmed.prefix { $0 == marker }.count
                        if candidateIndent <= 3, closing >= fence, trimmed.dropFirst(closing).allSatisfy({ $0 == " " || $0 == "\t" }) {
                            break
                        }
                        body.append(indent > 0 ? String(removingUpTo: indent, spacesFrom: candidate) : candidate)
                        next += 1
                    }
                    return body
                }
            }
            index += 1
        }
        return nil
    }

    /// `` `cmd` `` or ``` ``cmd`` ``` around the whole text.
    static func wholeInlineCode(_ text: String) -> String? {
        guard text.first == "`", text.last == "`" else { return nil }
        let ticks = text.prefix { $0 == "`" }.count
        guard text.count > 2 * ticks, text.suffix(ticks).allSatisfy({ $0 == "`" }) else { return nil }
        let inner = text.dropFirst(ticks).dropLast(ticks)
        guard !inner.contains(String(repeating: "`", count: ticks)), inner.last != "`" else { return nil }
        return String(inner).trimmedWhitespace
    }

    /// `$ cmd` lines become `cmd` when every non-blank line is written that way.
    static func stripPrompts(_ lines: [String]) -> [String] {
        let nonBlank = lines.filter { !$0.trimmedWhitespace.isEmpty }
        guard !nonBlank.isEmpty, nonBlank.allSatisfy({ $0.hasPrefix("$ ") }) else { return lines }
        return lines.map { $0.hasPrefix("$ ") ? String($0.dropFirst(2)) : $0 }
    }
}

/// The terminal the command will be shown on, in character cells.
public struct ScreenSize: Equatable, Sendable {
    public var columns: Int
    public var rows: Int

    public init(columns: Int, rows: Int) {
        self.columns = max(1, columns)
        self.rows = max(1, rows)
    }

    /// What a terminal that does not say is assumed to be.
    public static let fallback = ScreenSize(columns: 80, rows: 24)
}

/// A command the key may put on the command line: lines without blank ones and without
/// anything that hides text (see `CommandReply.checked`).
public struct ShellCommand: Equatable, Sendable {
    public var lines: [String]

    public init(lines: [String]) { self.lines = lines }

    /// What goes into the line editor's buffer.
    public var text: String { lines.joined(separator: "\n") }

    /// Rows kept free beside the command: the prompt's line, the line of the listing's
    /// heading and one for the shell's own redraw.
    static let reservedRows = 3

    /// For a command of more than one line, shown above the prompt before it is inserted:
    /// each line numbered, so where one ends and the next begins is plain; empty for one line.
    public var listing: String {
        guard lines.count > 1 else { return "" }
        let width = String(lines.count).count
        var text = "confab: a command of \(lines.count) lines; each one runs when you press Enter:\n"
        for (index, line) in lines.enumerated() {
            let number = String(index + 1)
            text += String(repeating: " ", count: width - number.count) + number + "  " + line + "\n"
        }
        return text
    }

    /// Rows the command takes on a screen `columns` wide: in the listing and in the buffer
    /// for more than one line, in the buffer alone for one. A character outside ASCII counts
    /// as two columns, so the estimate errs on the tall side.
    public func rows(columns: Int) -> Int {
        let gutter = String(lines.count).count + 2
        var rows = 0
        for line in lines {
            var width = 0
            for scalar in line.unicodeScalars { width += scalar.isASCII ? 1 : 2 }
            // The buffer's first line follows the prompt; a prompt of up to 20 columns is allowed for.
            let inBuffer = (width + 20 + columns - 1) / columns
            let inListing = (width + gutter + columns - 1) / columns
            rows += lines.count > 1 ? inBuffer + inListing : inBuffer
        }
        return rows
    }
}

extension String {
    init(removingUpTo count: Int, spacesFrom line: String) {
        let spaces = Swift.min(count, line.prefix(while: { $0 == " " }).count)
        self.init(line.dropFirst(spaces))
    }

    /// Without spaces, tabs and line breaks at either end.
    public var trimmedWhitespace: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last])
    }

    /// Without spaces, tabs and line breaks at the end.
    var trimmingTrailingWhitespace: String {
        var text = self
        while let last = text.unicodeScalars.last, last.properties.isWhitespace { text.unicodeScalars.removeLast() }
        return text
    }
}
