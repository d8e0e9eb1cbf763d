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
///
/// No text is ever laid out twice. When the live rows must stay as they stand (something
/// else was printed below them, or the window changed size and the terminal reflowed
/// them), `settle` makes them final and what comes next is laid out from where they end:
/// the rest of the open block on a row of its own, never the block again from its start.
/// With `holdsPartialWords` the live rows never end in half a word (a short run of text
/// after the last space waits for the next one), so that a settled block goes on at a
/// word's start.
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
    /// Bytes at the start of `source` already on the screen for good (`settle`): never laid out again.
    private var settledBytes = 0
    /// Bytes of `source` the last update laid out.
    private var drawnBytes = 0
    /// Whether the live rows leave out a short unfinished word at the end of the text so far.
    public var holdsPartialWords = false

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
        let shown = holdsPartialWords ? Self.wholeWords(source) : source
        drawnBytes = shown.utf8.count
        var live = rendering(shown)
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
        settledBytes = 0
        drawnBytes = 0
        return rows
    }

    /// The live rows stay on the screen as they stand (something else was printed after
    /// them, or the window changed size and the terminal reflowed them): they are final,
    /// and what comes next is laid out after them, starting at `firstColumn` of a fresh row.
    /// What they show is never laid out again. Committed rows stay as they are.
    public mutating func settle(firstColumn: Int) {
        settledBytes = max(settledBytes, drawnBytes)
        frozenRows = 0
        self.firstColumn = firstColumn
    }

    /// The text without its last word when that word may not be finished: a run of at most
    /// 32 bytes after the last white space. A longer run (a long link, text without spaces)
    /// is shown as it comes.
    static func wholeWords(_ text: String) -> String {
        let bytes = Array(text.utf8)
        guard let last = bytes.lastIndex(where: { $0 == 0x20 || $0 == 0x0A || $0 == 0x09 }) else {
            return bytes.count <= 32 ? "" : text
        }
        let tail = bytes.count - last - 1
        guard tail > 0, tail <= 32 else { return text }
        return String(decoding: bytes[...last], as: UTF8.self)
    }

    /// Commits the blocks before the last one that starts on a complete line.
    private mutating func commitClosedBlocks() -> [String] {
        guard let lastNewline = source.lastIndex(of: "\n") else { return [] }
        let blocks = Markdown.parse(String(source[...lastNewline]))
        guard blocks.count > 1, let open = blocks.last else { return [] }
        let closedText = String(source[..<Self.start(ofLine: open.line, in: source)])
        var rows = rendering(Array(blocks.dropLast()), of: closedText)
        let seen = min(frozenRows, rows.count)
        frozenRows -= seen
        rows.removeFirst(seen)
        closedBlocks += blocks.count - 1
        firstColumn = 0
        let dropped = closedText.utf8.count
        settledBytes = max(0, settledBytes - dropped)
        drawnBytes = max(0, drawnBytes - dropped)
        source = String(source[Self.start(ofLine: open.line, in: source)...])
        return rows
    }

    private func rendering(_ text: String) -> [String] {
        rendering(Markdown.parse(text), of: text)
    }

    /// The rows of `blocks` (parsed from `text`, which starts the open part of the source),
    /// less what is settled on the screen already: a block shown whole is left out, one
    /// shown in part is laid out from where the screen leaves it.
    private func rendering(_ blocks: [LocatedBlock], of text: String) -> [String] {
        guard settledBytes > 0 else {
            return renderer.rows(for: blocks.map(\.block), index: closedBlocks, width: width, firstColumn: firstColumn)
        }
        let bytes = Array(text.utf8)
        let settled = min(settledBytes, bytes.count)
        let starts = blocks.map { Self.byteOffset(ofLine: $0.line, in: bytes) }
        var rows: [String] = []
        for (number, located) in blocks.enumerated() {
            let start = starts[number]
            let end = number + 1 < starts.count ? starts[number + 1] : bytes.count
            if end <= settled { continue }
            if start >= settled {
                // Wholly new: after a blank row, unless it starts on a header's row.
                let afterHeader = rows.isEmpty && firstColumn > 0
                rows += renderer.rows(for: [located.block], index: afterHeader ? 0 : 1, width: width,
                                      firstColumn: afterHeader ? firstColumn : 0)
                continue
            }
            let shown = String(decoding: bytes[start..<settled], as: UTF8.self)
            let whole = String(decoding: bytes[start..<end], as: UTF8.self)
            rows += rest(of: located.block, shown: shown, whole: whole, firstColumn: rows.isEmpty ? firstColumn : 0)
        }
        return rows
    }

    /// The rows of the part of a block not on the screen yet: a code block's further lines
    /// in a frame of their own, anything else as the markdown its remaining text makes.
    private func rest(of block: Block, shown: String, whole: String, firstColumn: Int) -> [String] {
        if case .code(let language, let code) = block {
            var shownCode = ""
            if case .code(_, let text)? = Markdown.parse(shown).first?.block { shownCode = text }
            let more = code.hasPrefix(shownCode) ? String(code.dropFirst(shownCode.count)) : code
            guard !more.isEmpty else { return [] }
            return renderer.rows(for: [.code(language: language, text: more)], index: 0, width: width, firstColumn: firstColumn)
        }
        let more = Self.literalStart(String(decoding: Array(whole.utf8.dropFirst(shown.utf8.count)), as: UTF8.self))
        guard !more.isEmpty else { return [] }
        return renderer.rows(for: Markdown.parse(more).map(\.block), index: 0, width: width, firstColumn: firstColumn)
    }

    /// Text that goes on mid-way through a block, made to start a paragraph: without the
    /// white space before it (which could make it code), and with the first character that
    /// would start a list, a heading, a quote or the like escaped.
    static func literalStart(_ text: String) -> String {
        var text = Substring(text)
        while let first = text.first, first == " " || first == "\t" || first == "\n" { text.removeFirst() }
        guard !text.isEmpty else { return "" }
        if case .paragraph? = Markdown.parse(String(text)).first?.block { return String(text) }
        // `1.` or `1)` at a line's start is an ordered list.
        let digits = text.prefix { $0.isASCII && $0.isNumber }
        if !digits.isEmpty { return digits + "\\" + text.dropFirst(digits.count) }
        if let first = text.first, first.isASCII, first.isPunctuation || first.isSymbol { return "\\" + text }
        return String(text)
    }

    /// Where line `line` (1 for the first) of `bytes` starts, in bytes.
    private static func byteOffset(ofLine line: Int, in bytes: [UInt8]) -> Int {
        var remaining = line - 1
        var index = 0
        while remaining > 0, let newline = bytes[index...].firstIndex(of: 0x0A) {
            index = newline + 1
            remaining -= 1
        }
        return index
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
