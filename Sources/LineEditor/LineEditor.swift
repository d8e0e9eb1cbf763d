#if canImport(Glibc)
import Glibc
#endif
import CLibEdit

/// The line `confab attach` types into: libedit (cursor motion, word motions, history
/// with Ctrl-R search, UTF-8), fed one key at a time from the caller's poll loop through
/// its callback interface, so replies can stream while a line is half typed.
///
/// libedit calls back with each finished line; the callback only records it, and the
/// caller takes what was recorded after `readKey` returns.
public final class LineEditor {
    public enum Input: Equatable {
        case line(String)
        /// Ctrl-D on an empty line.
        case end
    }

    nonisolated(unsafe) private static var received: [Input] = []
    private let historyFile: String?
    private var active = false
    private var prompt: String

    /// Takes over the terminal on standard input. `historyFile` is read now and written
    /// at `stop`.
    public init(prompt: String, historyFile: String?) {
        self.historyFile = historyFile
        self.prompt = prompt
        // SIGINT and SIGWINCH are the caller's (a signal pipe); libedit must not take them.
        confab_rl_set_catch_signals(0)
        using_history()
        stifle_history(1000)
        if let historyFile { _ = read_history(historyFile) }
        install(prompt)
        // libedit's callback interface drops the end of file it reads: Ctrl-D is ours.
        // On an empty line it ends input; on a typed one it does nothing, as in shells
        // that do not delete with it.
        _ = rl_add_defun("confab-end-of-input", { _, _ in
            if confab_rl_line_length() == 0 { LineEditor.received.append(.end) }
            return 0
        }, 4)
        active = true
    }

    private func install(_ prompt: String) {
        rl_callback_handler_install(prompt) { line in
            if let line {
                LineEditor.received.append(.line(String(cString: line)))
                free(line)
            } else {
                LineEditor.received.append(.end)
            }
        }
    }

    /// Reads what standard input has (one key, or the rest of an escape sequence) and
    /// returns the lines it finished.
    public func readKey() -> [Input] {
        rl_callback_read_char()
        defer { Self.received = [] }
        for case .line(let text) in Self.received where !text.isEmpty {
            add_history(text)
        }
        // A finished line leaves the input row for the next one, empty. libedit's
        // callback interface does not start the next line afresh by itself (the old text
        // stays in its display, and keys are taken literally): installing again does.
        if !Self.received.isEmpty {
            rl_callback_handler_remove()
            install(prompt)
            redraw()
        }
        return Self.received
    }

    /// A new prompt (the conversation changed); the line typed so far stays.
    public func setPrompt(_ prompt: String) {
        self.prompt = prompt
        rl_set_prompt(prompt)
        redraw()
    }

    /// Throws away the line being typed.
    public func clearLine() {
        // rl_replace_line ignores an empty text; a new install starts an empty line.
        rl_callback_handler_remove()
        install(prompt)
        redraw()
    }

    /// Draws the prompt and the line again on a row wiped clean (of an echoed ^C, or of
    /// the line just sent).
    public func redraw() {
        let wipe: [UInt8] = [0x0D, 0x1B, 0x5B, 0x4B]  // CR, ESC [ K
        _ = wipe.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
        rl_forced_update_display()
    }

    public func resized() {
        rl_resize_terminal()
        redraw()
    }

    /// Gives the terminal back as it was, and keeps the history.
    public func stop() {
        guard active else { return }
        active = false
        rl_callback_handler_remove()
        if let historyFile { _ = write_history(historyFile) }
    }

    deinit { stop() }
}
