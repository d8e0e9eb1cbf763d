import Markdown

/// Markdown laid out in terminal rows: headings, emphasis, inline code, fenced code with its
/// language, lists, quotes, tables in aligned columns, links with their URL.
///
/// Every row fits in `width` columns by display width, so that a terminal never wraps one
/// by itself (the row counts of `LiveRows` depend on it): prose wraps between words, code
/// is cut where the row ends and goes on in the next, never reflowed. Every string the
/// parser hands over passes `SafeText` before it is measured. With `colour`, emphasis and
/// the like are SGR attributes and each row ends with its attributes reset; without, no
/// escape sequence at all, and the markers stay where attributes would have been
/// (`*em*`, `**strong**`, `` `code` ``).
public struct MarkdownRenderer: Sendable {
    public let colour: Bool

    public init(colour: Bool) {
        self.colour = colour
    }

    /// The rows of a whole text.
    public func render(_ text: String, width: Int, firstColumn: Int = 0) -> [String] {
        rows(for: Markdown.parse(LineBreaks.normalized(text)).map(\.block), index: 0, width: width, firstColumn: firstColumn)
    }

    /// The rows of `blocks`, the top-level blocks number `index`, `index + 1`, … of a text:
    /// a blank row goes before each one but the text's first. When `firstColumn` is not 0 the
    /// first row starts there, after a header: a paragraph's first row is that much shorter,
    /// and any other block starts on the row after.
    public func rows(for blocks: [Block], index: Int, width: Int, firstColumn: Int) -> [String] {
        let width = max(1, width)
        var rows: [String] = []
        for (offset, block) in blocks.enumerated() {
            let sharesHeaderRow = rows.isEmpty && firstColumn > 0
            if index + offset > 0 {
                rows.append("")
            } else if sharesHeaderRow, !Self.fitsAfterHeader(block, width - firstColumn) {
                rows.append("")
            }
            let firstWidth = rows.isEmpty && firstColumn > 0 ? width - firstColumn : width
            rows += lines(block, width: width, firstWidth: firstWidth).map(\.text)
        }
        return rows
    }

    /// Only prose goes on the header's row, and only when a few words fit there.
    private static func fitsAfterHeader(_ block: Block, _ columns: Int) -> Bool {
        if case .paragraph = block { return columns >= 12 }
        return false
    }

    // MARK: Blocks

    private func lines(_ block: Block, width: Int, firstWidth: Int) -> [Line] {
        switch block {
        case .paragraph(let inlines):
            return wrap(cells(inlines, []), width: width, firstWidth: firstWidth).map(line)
        case .heading(let level, let inlines):
            let style: Style = level == 1 ? [.bold, .underline] : [.bold]
            let marks = cells(String(repeating: "#", count: max(1, level)) + " ", [.bold])
            return wrap(marks + cells(inlines, style), width: width, firstWidth: width).map(line)
        case .code(let language, let text):
            return code(language: language, text: text, width: width)
        case .quote(let blocks):
            return prefixed(children(blocks, width: width - 2, tight: false), first: styled("│ ", .dim), rest: styled("│ ", .dim))
        case .list(let ordered, let start, let tight, let items):
            var rows: [Line] = []
            for (number, item) in items.enumerated() {
                if !tight && number > 0 { rows.append(Line()) }
                let marker = ordered ? "\(start + number). " : "• "
                let markerWidth = DisplayWidth.of(marker)
                var inner = children(item, width: width - markerWidth, tight: tight)
                if inner.isEmpty { inner = [Line()] }
                rows += prefixed(inner, first: styled(marker, []), rest: Line(text: String(repeating: " ", count: markerWidth), width: markerWidth))
            }
            return rows
        case .table(let alignments, let rows):
            return table(alignments: alignments, rows: rows, width: width)
        case .rule:
            return [styled(String(repeating: "─", count: min(width, 40)), .dim)]
        case .html(let text) where Self.holdsThought(text):
            // A model's `<think>` block inline in its content (a server without a reasoning
            // parser): prose, wrapped between words like prose, dim.
            return thoughtRows(text, width: width)
        case .html(let text):
            return verbatim(text, width: width).map { line($0.map { Cell($0.character, $0.width, .dim) }) }
        }
    }

    /// Whether an HTML block is (part of) a `<think>…</think>` block rather than markup.
    static func holdsThought(_ text: String) -> Bool {
        text.contains("<think>") || text.contains("</think>")
    }

    /// A `<think>` block's lines, tags included, each wrapped between words at `width`.
    private func thoughtRows(_ text: String, width: Int) -> [Line] {
        var lines = SafeText.sanitized(text).split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last?.isEmpty ?? false { lines.removeLast() }
        return lines.flatMap { source -> [Line] in
            let line = String(source).replacing("\t", with: "    ")
            return TextRows.wrap(line, width: max(1, width)).map { styled($0, .dim) }
        }
    }

    /// Blocks inside a quote or a list item, a blank row between them unless the list is tight.
    private func children(_ blocks: [Block], width: Int, tight: Bool) -> [Line] {
        let width = max(1, width)
        var rows: [Line] = []
        for (number, block) in blocks.enumerated() {
            if number > 0 && !tight { rows.append(Line()) }
            rows += lines(block, width: width, firstWidth: width)
        }
        return rows
    }

    private func prefixed(_ rows: [Line], first: Line, rest: Line) -> [Line] {
        rows.enumerated().map { number, row in
            let prefix = number == 0 ? first : rest
            // A blank row keeps no trailing spaces, only what marks it (a quote's bar).
            if row.width == 0 {
                let mark = prefix.text.replacing(" ", with: "")
                return Line(text: mark, width: DisplayWidth.of(visibleText(mark)))
            }
            return Line(text: prefix.text + row.text, width: prefix.width + row.width)
        }
    }

    /// A frame with the language on its top edge; the code as it is, cut where rows end.
    private func code(language: String, text: String, width: Int) -> [Line] {
        let label = SafeText.singleLine(language)
        var rows = [line(cells("┌─", .dim) + (label.isEmpty ? [] : cells(" " + label, .bold)))]
        let bar = styled("│ ", .dim)
        for row in verbatim(text, width: width - 2) {
            rows.append(row.isEmpty ? styled("│", .dim) : Line(text: bar.text + line(row).text, width: bar.width + row.reduce(0) { $0 + $1.width }))
        }
        rows.append(styled("└─", .dim))
        return rows
    }

    /// Text kept as it is (code, HTML): one row per line, tabs to stops of four, each row
    /// cut into pieces of at most `width` columns.
    private func verbatim(_ text: String, width: Int) -> [[Cell]] {
        let width = max(1, width)
        var lines = SafeText.sanitized(text).split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last?.isEmpty ?? false { lines.removeLast() }
        var rows: [[Cell]] = []
        for text in lines {
            var row: [Cell] = []
            var column = 0
            var emitted = false
            for character in text {
                let expanded: [Character] = character == "\t" ? Array(repeating: " ", count: 4 - column % 4) : [character]
                for piece in expanded {
                    let pieceWidth = DisplayWidth.of(piece)
                    if column + pieceWidth > width && column > 0 {
                        rows.append(row)
                        emitted = true
                        row = []
                        column = 0
                    }
                    row.append(Cell(piece, pieceWidth, []))
                    column += pieceWidth
                }
            }
            if !row.isEmpty || !emitted { rows.append(row) }
        }
        return rows
    }

    // MARK: Tables

    private static let columnGap = " │ "

    private func table(alignments: [TableAlignment], rows: [[[Inline]]], width: Int) -> [Line] {
        let columns = rows.map(\.count).max() ?? 0
        guard columns > 0 else { return [] }
        let contents: [[[Cell]]] = rows.enumerated().map { number, row in
            (0..<columns).map { column in
                column < row.count ? cells(row[column], number == 0 ? [.bold] : []) : []
            }
        }
        var widths = (0..<columns).map { column in
            max(1, contents.map { $0[column].reduce(0) { $0 + $1.width } }.max() ?? 1)
        }
        let available = width - DisplayWidth.of(Self.columnGap) * (columns - 1)
        guard available >= columns * 3 else {
            // Too many columns to be columns: each row as a line of its own.
            return contents.flatMap { row in
                wrap(Array(row.joined(separator: cells(Self.columnGap, .dim))), width: width, firstWidth: width).map(line)
            }
        }
        // Too wide: the widest column gives up a column at a time, its cells wrap.
        while widths.reduce(0, +) > available, let widest = widths.indices.max(by: { widths[$0] < widths[$1] }) {
            widths[widest] -= 1
        }
        let gap = styled(Self.columnGap, .dim)
        var lines: [Line] = []
        for (number, row) in contents.enumerated() {
            let wrapped = row.enumerated().map { column, cells in wrap(cells, width: widths[column], firstWidth: widths[column]) }
            let height = wrapped.map(\.count).max() ?? 1
            for rowLine in 0..<height {
                var text = ""
                var used = 0
                for column in 0..<columns {
                    if column > 0 {
                        text += gap.text
                        used += gap.width
                    }
                    let piece = rowLine < wrapped[column].count ? wrapped[column][rowLine] : []
                    let pieceWidth = piece.reduce(0) { $0 + $1.width }
                    let room = widths[column] - pieceWidth
                    let alignment = column < alignments.count ? alignments[column] : .none
                    let before = alignment == .right ? room : alignment == .center ? room / 2 : 0
                    text += String(repeating: " ", count: before) + line(piece).text + String(repeating: " ", count: room - before)
                    used += widths[column]
                }
                lines.append(Line(text: text, width: used))
            }
            if number == 0 {
                let rule = widths.map { String(repeating: "─", count: $0) }.joined(separator: "─┼─")
                lines.append(styled(rule, .dim))
            }
        }
        return lines
    }

    // MARK: Inline text

    struct Style: OptionSet, Hashable {
        let rawValue: UInt8
        static let bold = Style(rawValue: 1)
        static let italic = Style(rawValue: 2)
        static let underline = Style(rawValue: 4)
        static let dim = Style(rawValue: 8)
        static let strike = Style(rawValue: 16)
        static let code = Style(rawValue: 32)

        var sgr: String {
            var codes = ["0"]
            if contains(.bold) { codes.append("1") }
            if contains(.dim) { codes.append("2") }
            if contains(.italic) { codes.append("3") }
            if contains(.underline) { codes.append("4") }
            if contains(.strike) { codes.append("9") }
            if contains(.code) { codes.append("33") }
            return "\u{1B}[" + codes.joined(separator: ";") + "m"
        }
    }

    struct Cell {
        let character: Character
        let width: Int
        let style: Style

        init(_ character: Character, _ width: Int, _ style: Style) {
            self.character = character
            self.width = width
            self.style = style
        }
    }

    struct Line {
        var text = ""
        var width = 0
    }

    /// Text of ours or made safe, one cell a character; line breaks and tabs become spaces.
    private func cells(_ text: String, _ style: Style) -> [Cell] {
        text.map { character in
            let character: Character = character == "\n" || character == "\t" || character == "\r\n" ? " " : character
            return Cell(character, DisplayWidth.of(character), style)
        }
    }

    private func cells(_ inlines: [Inline], _ style: Style) -> [Cell] {
        var result: [Cell] = []
        for inline in inlines {
            switch inline {
            case .text(let text):
                result += cells(SafeText.sanitized(text), style)
            case .code(let text):
                let safe = SafeText.sanitized(text)
                result += colour ? cells(safe, style.union(.code)) : cells("`" + safe + "`", style)
            case .emphasis(let inner):
                result += marked(inner, style, attribute: .italic, marker: "*")
            case .strong(let inner):
                result += marked(inner, style, attribute: .bold, marker: "**")
            case .strikethrough(let inner):
                result += marked(inner, style, attribute: .strike, marker: "~~")
            case .link(let destination, let inner):
                let text = cells(inner, colour ? style.union(.underline) : style)
                let url = SafeText.sanitized(destination)
                result += text
                let shown = String(text.map(\.character))
                // An autolink (or a link written as its own address) shows the address once.
                if !url.isEmpty, shown != url, "mailto:" + shown != url {
                    result += cells(" (" + url + ")", style.union(.dim))
                }
            case .image(let source, let inner):
                result += cells("image: ", style.union(.dim)) + cells(inner, style)
                result += cells(" (" + SafeText.sanitized(source) + ")", style.union(.dim))
            case .softBreak:
                result += cells(" ", style)
            case .lineBreak:
                result.append(Cell("\n", 0, style))
            case .html(let text):
                result += cells(SafeText.sanitized(text), style.union(.dim))
            }
        }
        return result
    }

    /// Emphasis of some kind: an attribute in colour, else its markdown markers.
    private func marked(_ inner: [Inline], _ style: Style, attribute: Style, marker: String) -> [Cell] {
        if colour { return cells(inner, style.union(attribute)) }
        return cells(marker, style) + cells(inner, style) + cells(marker, style)
    }

    private func styled(_ text: String, _ style: Style) -> Line {
        line(cells(text, style))
    }

    /// One row's cells as text, with an SGR sequence wherever the attributes change.
    private func line(_ cells: [Cell]) -> Line {
        var text = ""
        var width = 0
        var current: Style = []
        for cell in cells {
            if colour && cell.style != current {
                text += cell.style.sgr
                current = cell.style
            }
            text.append(cell.character)
            width += cell.width
        }
        if colour && current != [] { text += "\u{1B}[0m" }
        return Line(text: text, width: width)
    }

    /// Prose broken into rows between words (at spaces, and around wide characters, which
    /// need none), the first row `firstWidth` columns, the others `width`; a word longer
    /// than a row is cut where the row ends. A cell holding "\n" is a hard line break.
    private func wrap(_ cells: [Cell], width: Int, firstWidth: Int) -> [[Cell]] {
        var rows: [[Cell]] = [[]]
        var column = 0
        var limit = max(1, firstWidth)
        var word: [Cell] = []
        var wordWidth = 0
        var spaces: [Cell] = []

        func newRow() {
            rows.append([])
            column = 0
            limit = max(1, width)
        }
        func placeWord() {
            defer { word = []; wordWidth = 0; spaces = [] }
            guard !word.isEmpty else { return }
            if column > 0 && column + spaces.count + wordWidth > limit {
                newRow()
            } else if column > 0 {
                let gap = spaces.prefix(limit - column)
                rows[rows.count - 1] += gap
                column += gap.count
            }
            for cell in word {
                if column + cell.width > limit && column > 0 { newRow() }
                rows[rows.count - 1].append(cell)
                column += cell.width
            }
        }

        for cell in cells {
            switch cell.character {
            case "\n":
                placeWord()
                newRow()
            case " ":
                if !word.isEmpty { placeWord() }
                spaces.append(cell)
            default:
                if cell.width == 2 {
                    // A wide character is a word of its own.
                    if !word.isEmpty { placeWord() }
                    word = [cell]
                    wordWidth = 2
                    placeWord()
                } else {
                    word.append(cell)
                    wordWidth += cell.width
                }
            }
        }
        placeWord()
        return rows
    }
}

/// `text` without escape sequences of ours (CSI: `ESC [`, parameters, a final letter).
func visibleText(_ text: String) -> String {
    guard text.contains("\u{1B}") else { return text }
    var result = ""
    var inEscape = false
    for character in text {
        if inEscape {
            if let ascii = character.asciiValue, ascii >= 0x40, ascii <= 0x7E, character != "[" { inEscape = false }
        } else if character == "\u{1B}" {
            inEscape = true
        } else {
            result.append(character)
        }
    }
    return result
}

extension DisplayWidth {
    /// The columns a row of ours takes: its escape sequences take none.
    public static func visible(_ text: String) -> Int { of(visibleText(text)) }
}
