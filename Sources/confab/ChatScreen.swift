#if canImport(Glibc)
import Glibc
#endif
import Terminal

/// attach's screen on a terminal: every row but the last two is a scroll region where the
/// conversation flows; under it is the status row (what a reply waits for, its thinking,
/// who joined or left while it streams), then the input line, which libedit owns. As with
/// tmux's status line, the status row is out of the region: nothing written there ever
/// reaches the scrollback or moves the conversation's text. Output is written at the
/// region's bottom (where the previous output ended) and the cursor is put back on the
/// input line, so typing and streaming never mix.
final class ChatScreen {
    private(set) var columns = 80
    private var rows = 24
    /// Where output ends on the region's last row.
    private var column = 0
    /// What the status row shows (one row, made safe and cut to fit by the caller).
    private var statusLine = ""

    init() {
        measure()
        // A clear screen, the region, and the cursor on the input row.
        Out.stdout("\u{1B}[H\u{1B}[2J" + region())
    }

    private func measure() {
        if let size = TerminalSize.of(1) {
            columns = size.columns
            rows = max(3, size.rows)
        }
    }

    /// Sets the scroll region (which homes the cursor), then goes to the input row.
    private func region() -> String { "\u{1B}[1;\(rows - 2)r\u{1B}[\(rows);1H" }

    /// Rows the conversation scrolls in.
    var regionRows: Int { rows - 2 }

    /// Shows `line` on the status row ("" empties it); the cursor goes back to the input line.
    func status(_ line: String) {
        guard line != statusLine else { return }
        statusLine = line
        Out.stdout(drawStatus())
    }

    private func drawStatus() -> String {
        "\u{1B}7\u{1B}[\(rows - 1);1H\u{1B}[2K" + statusLine + "\u{1B}8"
    }

    /// Writes conversation output above the input line. Text that moves the cursor by
    /// itself (a reply's rows redrawn in place) says in `endingAt` where it leaves it.
    func output(_ text: String, endingAt endColumn: Int? = nil) {
        guard !text.isEmpty else { return }
        Out.stdout("\u{1B}7\u{1B}[\(rows - 2);\(column + 1)H" + text + "\u{1B}8")
        if let endColumn {
            column = endColumn
        } else if let newline = text.lastIndex(of: "\n") {
            column = Self.visibleWidth(text[text.index(after: newline)...])
        } else {
            column += Self.visibleWidth(text[...])
        }
        column = min(column, columns)
    }

    /// Display width, leaving out our own SGR sequences (`ESC [ … m`).
    static func visibleWidth(_ text: Substring) -> Int {
        var width = 0
        var inEscape = false
        for character in text {
            if inEscape {
                if character == "m" { inEscape = false }
            } else if character == "\u{1B}" {
                inEscape = true
            } else {
                width += DisplayWidth.of(character)
            }
        }
        return width
    }

    /// The window changed size: a new region; what is redrawn from now on wraps anew.
    func resized() {
        measure()
        column = min(column, columns)
        Out.stdout(region() + drawStatus())
    }

    /// Hands the whole terminal to another program ($EDITOR), or back to the shell.
    func suspend() {
        Out.stdout("\u{1B}[\(rows - 1);1H\u{1B}[2K\u{1B}[r\u{1B}[\(rows);1H\r\n")
    }

    func resume() {
        measure()
        column = 0
        Out.stdout("\u{1B}[H\u{1B}[2J" + region() + drawStatus())
    }
}
