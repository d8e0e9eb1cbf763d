/// What a shell session tells the model besides the user's words: the shell, the operating
/// system and the current directory. Never environment variables or file contents.
public struct ShellContext: Equatable, Sendable {
    public var shell: String
    public var system: String
    public var directory: String

    public init(shell: String, system: String, directory: String) {
        self.shell = shell
        self.system = system
        self.directory = directory
    }

    var line: String { "Shell: \(shell). OS: \(system). Current directory: \(directory)." }
}

public enum Prompts {
    /// The command key's request: the words (or half-written command) on the line.
    public static func command(for line: String, context: ShellContext) -> String {
        """
        Write the \(context.shell) command for this; it goes onto my command line for me to check and run:
        \(line)

        \(context.line)
        Answer with the command alone in one fenced code block, no explanation.
        """
    }

    /// The explain key's request: the command on the line.
    public static func explain(_ line: String, context: ShellContext) -> String {
        """
        Explain briefly what this \(context.shell) command does, part by part, and anything risky about it:
        \(line)

        \(context.line)
        """
    }

    /// `ask --last`: the previous command line and how it ended, before the question.
    public static func withLastCommand(_ prompt: String, command: String, status: String) -> String {
        """
        My previous command was:
        \(command)
        It exited with status \(status).

        \(prompt)
        """
    }
}

/// Names of the conversations the client picks for itself.
public enum ConversationNames {
    /// A shell session's conversation: the terminal and the directory, e.g. `pts/3 ~/src/app`.
    public static func session(terminal: String?, directory: String, home: String?) -> String {
        var shown = directory
        if let home, !home.isEmpty, home != "/" {
            if directory == home { shown = "~" } else if directory.hasPrefix(home + "/") { shown = "~" + directory.dropFirst(home.count) }
        }
        var tty = terminal ?? "shell"
        if tty.hasPrefix("/dev/") { tty.removeFirst(5) }
        return tty + " " + shown
    }

    /// The conversation that one-shot `confab ask` calls of a day share: `ask 2026-11-23`.
    public static func day(year: Int, month: Int, day: Int) -> String {
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "ask \(year)-\(two(month))-\(two(day))"
    }

    /// Whether `CONFAB_SESSION` can name a file: letters, digits, `-`, `_`, `.`, not only dots.
    public static func isValidSession(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count <= 128, !id.allSatisfy({ $0 == "." }) else { return false }
        return id.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "-_.".unicodeScalars.contains(scalar))
        }
    }
}
