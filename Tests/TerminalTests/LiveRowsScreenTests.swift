import Terminal
import XCTest

private extension String {
    var trimmingTrailingBlanks: String {
        var text = self.replacing("\u{0}", with: "")
        while text.last == " " { text.removeLast() }
        return text
    }
}

/// A terminal reduced to what `LiveRows` and attach's transcript write: printable text with
/// auto-wrap (and the last column's pending wrap), line feeds that return the carriage (a
/// terminal's `onlcr`), carriage returns, cursor up and right, erase to the end of the row,
/// and colours, which it ignores. Rows scrolled off the top are kept, so the whole output
/// can be read back.
private struct VirtualTerminal {
    let columns: Int
    let rows: Int
    private(set) var scrolledOff: [String] = []
    private var grid: [[Character]]
    private var row: Int
    private var column = 0
    private var pendingWrap = false

    init(columns: Int, rows: Int) {
        self.columns = columns
        self.rows = rows
        grid = Array(repeating: Array(repeating: " ", count: columns), count: rows)
        // As attach's chat screen does: output starts on the bottom row and scrolls up.
        row = rows - 1
    }

    /// Everything written, oldest row first, trailing blanks cut, blank rows around the text left out.
    var transcript: [String] {
        var all = Array((scrolledOff + grid.map { String($0).trimmingTrailingBlanks }).drop { $0.isEmpty })
        while all.last?.isEmpty == true { all.removeLast() }
        return all
    }

    private mutating func lineFeed() {
        pendingWrap = false
        if row == rows - 1 {
            scrolledOff.append(String(grid.removeFirst()).trimmingTrailingBlanks)
            grid.append(Array(repeating: " ", count: columns))
        } else {
            row += 1
        }
    }

    mutating func write(_ text: String) {
        var characters = Array(text)[...]
        while let character = characters.popFirst() {
            switch character {
            case "\n":
                column = 0
                lineFeed()
            case "\r":
                column = 0
                pendingWrap = false
            case "\u{1B}":
                guard characters.popFirst() == "[" else { XCTFail("not a CSI sequence in \(text.debugDescription)"); return }
                var parameter = ""
                while let next = characters.first, next.isNumber || next == ";" { parameter.append(characters.removeFirst()) }
                let count = Int(parameter) ?? 1
                switch characters.popFirst() {
                case "A": row = max(0, row - count); pendingWrap = false
                case "C": column = min(columns - 1, column + count); pendingWrap = false
                case "K": for index in column..<columns { grid[row][index] = " " }
                case "m": break
                case let other: XCTFail("unexpected CSI \(parameter)\(other.map(String.init) ?? "") in \(text.debugDescription)")
                }
            default:
                if pendingWrap {
                    column = 0
                    lineFeed()
                }
                let width = DisplayWidth.of(character)
                grid[row][column] = character
                if width == 2, column + 1 < columns { grid[row][column + 1] = "\u{0}" }
                if column + width >= columns {
                    column = columns - 1
                    pendingWrap = true
                } else {
                    column += width
                }
            }
        }
    }
}

/// A reply streaming as attach shows it, with other lines printed while its block is open:
/// the rows above it and the lines printed meanwhile are never written over, and the reply
/// ends whole, its last characters included.
final class LiveRowsScreenTests: XCTestCase {
    override class func setUp() { DisplayWidth.useUTF8Locale() }

    private static let reply = #"tool results: [guarded] {"method":"GET","path":"/tool/echo","query":"x=2&city=Paris","body":null,"headers":{"host":"127.0.0.1:40717","user-agent":"confabd","accept":"*/*"}} and *some* words after it"#

    private static func plain(_ row: String) -> String { row.replacing(/\u{1B}\[[0-9;]*m/, with: "") }

    /// Everything but white space, colours left out: what a reader reads, however it is laid out.
    private static func letters(_ rows: [String]) -> String {
        plain(rows.joined()).filter { !$0.isWhitespace }
    }

    /// Streams `reply` in `piece`-sized deltas, drawing once every `batch` of them, and prints a
    /// notice after the deltas numbered in `interjections`, the way attach's transcript does:
    /// the open block's rows stay, and the reply goes on under a "continued" header with
    /// what it had not shown. Every row above stays, and the reply's text is on the screen
    /// exactly once: nothing lost, nothing printed twice.
    private func stream(columns: Int, piece: Int, batch: Int, interjections: Set<Int>, colour: Bool) {
        let renderer = MarkdownRenderer(colour: colour)
        var terminal = VirtualTerminal(columns: columns, rows: 12)
        terminal.write("before one\nbefore two\n")

        let header = "assistant: ", continued = "assistant (continued): "
        var markdown = MarkdownStream(renderer: renderer, width: columns, maxLiveRows: 10, firstColumn: header.count)
        markdown.holdsPartialWords = true
        var live = LiveRows(startColumn: header.count)
        var column = header.count
        terminal.write(header)
        func draw() {
            let update = markdown.update()
            let output = live.replace(committing: update.committed, live: update.live)
            if !output.isEmpty { column = live.column }
            terminal.write(output)
        }

        let characters = Array(Self.reply)
        var index = 0, count = 0
        while index < characters.count {
            let next = String(characters[index..<min(characters.count, index + piece)])
            index += piece
            count += 1
            markdown.append(next)
            if count % batch == 0 || index >= characters.count { draw() }
            if interjections.contains(count), index < characters.count {
                draw()
                if column != 0 { terminal.write("\n") }
                terminal.write("-- notice \(count) --\n")
                terminal.write(continued)
                markdown.settle(firstColumn: continued.count)
                live = LiveRows(startColumn: continued.count)
                column = continued.count
            }
        }
        terminal.write(live.replace(committing: markdown.finish(), live: []))
        terminal.write("\n-- after --\n")

        let shown = terminal.transcript.map(Self.plain)
        let context = "columns \(columns), pieces of \(piece), batches of \(batch), notices after \(interjections.sorted()), colour \(colour)"
        XCTAssertEqual(Array(shown.prefix(2)), ["before one", "before two"], context)
        XCTAssertEqual(shown.last, "-- after --", context)
        XCTAssertEqual(shown.filter { $0.hasPrefix("-- notice") }.count, interjections.filter { $0 < (Self.reply.count + piece - 1) / piece }.count, context)
        let reply = shown.dropFirst(2).dropLast().filter { !$0.hasPrefix("-- notice") }
            .map { $0.replacing("assistant (continued):", with: "").replacing("assistant:", with: "") }
        XCTAssertEqual(Self.letters(Array(reply)), Self.letters(renderer.render(Self.reply, width: columns)), context)
        for row in shown { XCTAssertLessThanOrEqual(row.count, columns, context) }
    }

    func testAReplyInterruptedByNoticesKeepsEveryRowAboveItAndEndsWhole() {
        for colour in [false, true] {
            for columns in [40, 57, 80, 140] {
                for piece in [1, 3, 7] {
                    for batch in [1, 4] {
                        for interjections: Set<Int> in [[], [5], [20, 21], [30, 45, 46, 60]] {
                            stream(columns: columns, piece: piece, batch: batch, interjections: interjections, colour: colour)
                        }
                    }
                }
            }
        }
    }
}
