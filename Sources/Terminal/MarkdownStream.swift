import Markdown

/// A reply's markdown rendered while it streams, as rows that are final (`committed`) and
/// rows that may still change (`live`), for `LiveRows` to put on the screen.
///
/// A top-level block is final once another block starts after it on a complete line:
/// CommonMark never reopens a closed block, so its rows are committed and never drawn
/// again, and its text is dropped from what is parsed next. The last block (the paragraph
/// being written, a fence not yet closed, a table still growing) is rendered anew from its
/// start at each update; its rows are live. Live rows never number more than
/// `maxLiveRows` (what the screen can still reach by moving the cursor up): rows beyond that
/// are committed as they stand, and kept even if later text would lay them out otherwise.
public struct MarkdownStream {
    public let renderer: MarkdownRenderer
    /// Columns of the rows from now on.
    public var width: Int
    public var maxLiveRows: Int
    /// Text of the open block (and of whatever the last, unfinished line starts).
    private var source = ""
    /// Top-level blocks committed before the open one.
    private var closedBlocks = 0
    /// Rows of the open block's rendering already committed.
    private var frozenRows = 0
    /// Where the open block's first row starts (after a header), 0 once rows are committed.
    private var firstColumn: Int
    /// Line breaks made one kind before the text is parsed (a CR at a piece's end waits here).
    private var lineBreaks = LineBreaks.Normalizer()

    public struct Update: Equatable {
        public var committed: [String]
        public var live: [String]

        public init(committed: [String], live: [String]) {
            self.committed = committed
            self.live = live
        }
    }

    public init(renderer: MarkdownRenderer, width: Int, maxLiveRows: Int = 20, firstColumn: Int = 0) {
        self.renderer = renderer
        self.width = width
        self.maxLiveRows = max(1, maxLiveRows)
        self.firstColumn = firstColumn
    }

    public mutating func append(_ text: String) {
        source += lineBreaks.feed(text)
    }

    /// The rows that became final since the last update, and the live rows as they are now.
    public mutating func update() -> Update {
        var committed = commitClosedBlocks()
        var live = rendering(source)
        live.removeFirst(min(frozenRows, live.count))
        if live.count > max(1, maxLiveRows) {
            let excess = live.count - max(1, maxLiveRows)
            committed += live[..<excess]
            live.removeFirst(excess)
            frozenRows += excess
            firstColumn = 0
        }
        return Update(committed: committed, live: live)
    }

    /// The end of the text: every row not yet committed.
    public mutating func finish() -> [String] {
        source += lineBreaks.finish()
        var rows = rendering(source)
        rows.removeFirst(min(frozenRows, rows.count))
        closedBlocks += Markdown.parse(source).count
        source = ""
        frozenRows = 0
        firstColumn = 0
        return rows
    }

    /// The live rows were left on the screen as they stood (something else was printed
    /// after them, or the window changed size): the open block is shown again from its first
    /// row, which starts at `firstColumn`. Committed rows stay as they are.
    public mutating func restart(firstColumn: Int) {
        frozenRows = 0
        self.firstColumn = firstColumn
    }

    /// Commits the blocks before the last one that starts on a complete line.
    private mutating func commitClosedBlocks() -> [String] {
        guard let lastNewline = source.lastIndex(of: "\n") else { return [] }
        let blocks = Markdown.parse(String(source[...lastNewline]))
        guard blocks.count > 1, let open = blocks.last else { return [] }
        let closed = blocks.dropLast().map(\.block)
        var rows = renderer.rows(for: closed, index: closedBlocks, width: width, firstColumn: firstColumn)
        let seen = min(frozenRows, rows.count)
        frozenRows -= seen
        rows.removeFirst(seen)
        closedBlocks += closed.count
        firstColumn = 0
        source = String(source[Self.start(ofLine: open.line, in: source)...])
        return rows
    }

    private func rendering(_ text: String) -> [String] {
        renderer.rows(for: Markdown.parse(text).map(\.block), index: closedBlocks, width: width, firstColumn: firstColumn)
    }

    /// Where line `line` (1 for the first) of `text` starts.
    private static func start(ofLine line: Int, in text: String) -> String.Index {
        var remaining = line - 1
        var index = text.startIndex
        while remaining > 0, let newline = text[index...].firstIndex(of: "\n") {
            index = text.index(after: newline)
            remaining -= 1
        }
        return index
    }
}

/// The rows at the end of the output that may still change, and the text that turns them
/// into new ones. The cursor is at the end of the last of them; the first may start after a
/// header (`startColumn`). Rows are rewritten from the first one that changed, going back
/// up with the cursor (never further than the rows themselves), each erased before it is
/// written; text only added at the end is just written. Rows must fit the terminal's width
/// and line feeds must return the carriage (a terminal's usual `onlcr`).
public struct LiveRows {
    private var shown: [String] = []
    /// Where the first shown row starts.
    private var startColumn: Int
    /// Rows were committed and none is shown: the next one starts on a row of its own.
    private var afterCommitted = false
    /// Where the cursor is.
    public private(set) var column: Int

    public init(startColumn: Int = 0) {
        self.startColumn = startColumn
        column = startColumn
    }

    public var isEmpty: Bool { shown.isEmpty }

    /// The text that replaces the live rows with `committed` (final from now on) and then
    /// `live`. When there are fewer rows than were shown, blank ones take the place of the rest.
    public mutating func replace(committing committed: [String], live: [String]) -> String {
        var rows = committed + live
        guard !rows.isEmpty else { return "" }
        if rows.count < shown.count { rows += Array(repeating: "", count: shown.count - rows.count) }
        var text = ""
        let same = zip(shown, rows).prefix { $0 == $1 }.count
        if same == shown.count {
            if same < rows.count {
                if same > 0 || afterCommitted { text += "\n" }
                text += rows[same...].joined(separator: "\n")
            }
        } else if same == shown.count - 1, rows[same].hasPrefix(shown[same]), !shown[same].contains("\u{1B}") {
            text += String(rows[same].dropFirst(shown[same].count))
            if same + 1 < rows.count { text += "\n" + rows[(same + 1)...].joined(separator: "\n") }
        } else {
            let up = shown.count - 1 - same
            text += "\r" + (up > 0 ? "\u{1B}[\(up)A" : "")
            if same == 0 && startColumn > 0 { text += "\u{1B}[\(startColumn)C" }
            text += "\u{1B}[K" + rows[same...].joined(separator: "\n\u{1B}[K")
        }
        if !text.isEmpty {
            column = (rows.count == 1 ? startColumn : 0) + DisplayWidth.visible(rows[rows.count - 1])
        }
        if committed.isEmpty {
            shown = rows
        } else {
            shown = Array(rows.dropFirst(committed.count))
            startColumn = 0
            afterCommitted = shown.isEmpty
        }
        return text
    }
}
