#if canImport(Glibc)
import Glibc
#endif
import ShellIntegration
import Terminal

extension ShellKey {
    /// Prints the reply's command for the shell to put in its edit buffer, and a command of
    /// more than one line whole and numbered on the terminal first: what the buffer then
    /// holds is exactly what the person can see. A command that would not be seen whole
    /// is not printed at all (see `CommandReply.checked`).
    static func insert(_ reply: String) throws(Failure) {
        let size = TerminalSize.of(2).map { ScreenSize(columns: $0.columns, rows: $0.rows) } ?? .fallback
        let command: ShellCommand
        do {
            command = try CommandReply.checked(reply, screen: size)
        } catch {
            throw .message(error.description)
        }
        // On the terminal (standard output is the shell's, for the buffer), from the start of
        // the line the spinner used: the shell draws its prompt again below.
        if !command.listing.isEmpty { Out.stderrText((isatty(2) != 0 ? "\r\u{1B}[K" : "") + command.listing) }
        Out.stdout(command.text)
    }
}
