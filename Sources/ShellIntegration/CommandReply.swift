/// What the key binding puts on the command line from a model's reply: only the command.
public enum CommandReply {
    /// The first fenced code block's content; without one, the reply stripped of prose
    /// markers (an inline code span around the whole reply, `$ ` prompts). Multi-line commands
    /// stay multi-line; control characters are dropped (the line editor would show them raw).
    public static func command(from reply: String) -> String {
        let text = SafeText.keepingLines(reply)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.last == "\r" ? String(line.dropLast()) : String(line)
        }
        if let block = firstFencedBlock(lines) {
            return stripPrompts(block).joined(separator: "\n").trimmingBlankLines
        }
        var body = text.trimmedWhitespace
        if let inner = wholeInlineCode(body) { body = inner }
        let bodyLines = body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        return stripPrompts(bodyLines).joined(separator: "\n").trimmingBlankLines
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

/// Text from the model on its way to a terminal or a line editor.
public enum SafeText {
    /// Without control characters except line feed and tab, without C1 controls and without
    /// the bidirectional overrides that make text read differently from what runs.
    public static func keepingLines(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value == 0x0A || value == 0x09 { scalars.append(scalar); continue }
            if value < 0x20 || (0x7F...0x9F).contains(value) { continue }
            if (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value) { continue }
            scalars.append(scalar)
        }
        // CRLF line ends arrive as CR LF; the CR is gone above, the LF stays.
        return String(scalars)
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

    /// Without blank lines at either end and without trailing white space; indentation of the
    /// first line is kept.
    var trimmingBlankLines: String {
        var lines = split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        while let first = lines.first, first.trimmedWhitespace.isEmpty { lines.removeFirst() }
        while let last = lines.last, last.trimmedWhitespace.isEmpty { lines.removeLast() }
        guard !lines.isEmpty else { return "" }
        var text = lines.joined(separator: "\n")
        while let last = text.unicodeScalars.last, last.properties.isWhitespace { text.unicodeScalars.removeLast() }
        return text
    }
}
