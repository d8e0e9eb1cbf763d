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

    /// What Tab does: given the line up to the cursor, the whole lines it may become. One is
    /// put in the line; of several, what they all start with (and the caller may list them).
    public typealias Completer = (String) -> [String]

    nonisolated(unsafe) private static var completer: Completer?

    /// Takes over the terminal on standard input. `historyFile` is read now and written
    /// at `stop`.
    public init(prompt: String, historyFile: String?, completer: Completer? = nil) {
        self.historyFile = historyFile
        self.prompt = prompt
        Self.completer = completer
        confab_rl_set_line_completion { text, _, _ in
            LineEditor.completions(of: text.map { String(cString: $0) } ?? "")
        }
        // SIGINT and SIGWINCH are the caller's (a signal pipe); libedit must not take them.
        confab_rl_set_catch_signals(0)
        // Every key passes KeyFilter first: the line breaks of a bracketed paste stay in
        // the line, where libedit would take each as Enter.
        confab_rl_set_getc { _ in KeyFilter.next() }
        // No user lookups from Tab (see the shim): the static client must not load NSS modules.
        confab_rl_complete_file_names_without_tilde()
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
        // Whether anything is typed is known only inside a key's function: libedit updates
        // rl_end just before calling one. `hasTypedText` feeds this key to ask.
        _ = rl_add_defun("confab-line-state", { _, _ in
            LineEditor.lineHasText = confab_rl_line_length() > 0
            return 0
        }, Int32(KeyFilter.lineStateKey))
        Self.write("\u{1B}[?2004h")
        active = true
    }

    nonisolated(unsafe) private static var lineHasText = false

    /// libedit's form of the completions: what replaces the text, then each completion, then
    /// NULL, all from malloc (libedit frees them). The text is kept when the completions have
    /// no longer start in common with it (a title matched, not the id typed).
    private static func completions(of text: String) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? {
        confab_rl_completion_over()
        guard let completer, case let found = completer(text), !found.isEmpty else { return nil }
        var common = found[0]
        for other in found.dropFirst() {
            common = String(zip(common, other).prefix { $0 == $1 }.map(\.0))
        }
        let replacement = found.count == 1 ? found[0] : common.count >= text.count ? common : text
        let list = [replacement] + (found.count == 1 ? [found[0]] : [replacement])
        let size = MemoryLayout<UnsafeMutablePointer<CChar>?>.stride * (list.count + 1)
        guard let memory = malloc(size) else { return nil }
        let array = memory.bindMemory(to: UnsafeMutablePointer<CChar>?.self, capacity: list.count + 1)
        for (index, item) in list.enumerated() { array[index] = strdup(item) }
        array[list.count] = nil
        return array
    }

    /// Whether the line being typed holds anything.
    public var hasTypedText: Bool {
        Self.lineHasText = false
        KeyFilter.inject(KeyFilter.lineStateKey)
        rl_callback_read_char()
        return Self.lineHasText
    }

    private static func write(_ text: String) {
        var text = text
        _ = text.withUTF8 { Glibc.write(1, $0.baseAddress, $0.count) }
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
        // libedit's display does not know of text put in behind its back.
        if KeyFilter.insertedText() && Self.received.isEmpty { redraw() }
        for case .line(let text) in Self.received where !text.isEmpty {
            add_history(text)
        }
        let received = Self.received.map { input in
            guard case .line(let text) = input else { return input }
            return .line(text.replacing(KeyFilter.lineBreak, with: "\n"))
        }
        // A finished line leaves the input row for the next one, empty. libedit's
        // callback interface does not start the next line afresh by itself (the old text
        // stays in its display, and keys are taken literally): installing again does.
        if !Self.received.isEmpty {
            rl_callback_handler_remove()
            install(prompt)
            redraw()
        }
        return received
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
        Self.write("\r\u{1B}[K")
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
        Self.write("\u{1B}[?2004l")
        rl_callback_handler_remove()
        if let historyFile { _ = write_history(historyFile) }
    }

    deinit { stop() }
}

/// The keys libedit reads, one code point at a time (its getc hook wants whole
/// characters: UTF-8 is decoded here). Between ESC [200~ and ESC [201~ (a bracketed
/// paste) a line break is put into the line as it is instead of acting as Enter; at the
/// paste's end libedit gets Ctrl-Q (restart output, which changes nothing) so that it
/// shows the line again. Alt-Enter (ESC and a carriage return, as terminals send it) puts a
/// line break into the line the same way, so a message of several lines can be typed.
/// Everything else passes unchanged.
///
/// A line break stands in the line as `↵` while it is edited, and becomes "\n" again when
/// the line is taken: libedit shows a real one as nothing at all, and takes a line whose
/// last character is one as finished, which would send it at an Alt-Enter at its end.
/// (So a `↵` typed or pasted is sent as a line break too.)
enum KeyFilter {
    static let lineBreak = "\u{21B5}"

    nonisolated(unsafe) private static var queue: [UInt32] = []
    nonisolated(unsafe) private static var pasting = false
    /// Ctrl-Q: a key that changes nothing but has libedit redraw the line.
    private static let noChange: UInt32 = 0x11

    nonisolated(unsafe) private static var inserted = false

    /// Ctrl-\\ (FS): with the terminal's signals on it sends SIGQUIT and never reaches the
    /// editor as a key, so it is free to stand for a question to the editor of our own.
    static let lineStateKey: UInt32 = 0x1C

    /// `key` is the next one libedit reads, ahead of anything already queued.
    static func inject(_ key: UInt32) {
        queue.insert(key, at: 0)
    }

    private static func insertNewline() {
        _ = rl_insert_text(lineBreak)
        inserted = true
    }

    /// Whether a line break was put in since the last call.
    static func insertedText() -> Bool {
        defer { inserted = false }
        return inserted
    }

    static func next() -> Int32 {
        while queue.isEmpty {
            guard fill() else { return -1 }
        }
        return Int32(bitPattern: queue.removeFirst())
    }

    /// Reads at least one key into the queue; false at end of input.
    private static func fill() -> Bool {
        guard let byte = readByte(wait: true) else { return false }
        switch byte {
        case 0x1B:
            // A lone ESC (or Alt) comes alone; a sequence comes all at once.
            guard let second = readByte(wait: false) else {
                queue.append(0x1B)
                return true
            }
            if second == 0x0D || second == 0x0A {
                insertNewline()
                queue.append(noChange)
                return true
            }
            var sequence: [UInt8] = [second]
            let start: [UInt8] = Array("[200~".utf8), end: [UInt8] = Array("[201~".utf8)
            while sequence.count < 5, start.starts(with: sequence) || end.starts(with: sequence),
                  let more = readByte(wait: false) {
                sequence.append(more)
            }
            if sequence == start {
                pasting = true
            } else if sequence == end {
                pasting = false
                queue.append(noChange)
            } else {
                queue.append(0x1B)
                queue += sequence.map(UInt32.init)
            }
        case 0x0D where pasting, 0x0A where pasting:
            insertNewline()
        default:
            queue.append(decode(byte))
        }
        return true
    }

    /// One UTF-8 character starting with `first`; U+FFFD for a broken one.
    private static func decode(_ first: UInt8) -> UInt32 {
        let length = first < 0x80 ? 1 : first >= 0xF0 ? 4 : first >= 0xE0 ? 3 : first >= 0xC0 ? 2 : 0
        guard length > 1 else { return length == 1 ? UInt32(first) : 0xFFFD }
        var bytes = [first]
        while bytes.count < length, let more = readByte(wait: false) { bytes.append(more) }
        return String(validating: bytes, as: UTF8.self)?.unicodeScalars.first?.value ?? 0xFFFD
    }

    /// A byte of standard input; without `wait`, only one already there (or arriving
    /// within a few milliseconds, as the rest of a sequence does).
    private static func readByte(wait: Bool) -> UInt8? {
        if !wait {
            var ready = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 25) > 0 else { return nil }
        }
        var byte: UInt8 = 0
        while true {
            let count = read(0, &byte, 1)
            if count == 1 { return byte }
            if count < 0 && errno == EINTR { continue }
            return nil
        }
    }
}
