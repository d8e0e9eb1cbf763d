import ConfabProtocol

/// How much a line matters, as syslog numbers it (the journal reads `<N>`): lower is worse.
/// Typed, so that a misspelt level does not compile rather than quietly logging at info.
public enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case error = 3, warning = 4, notice = 5, info = 6, debug = 7

    /// "More than": `.error > .info`, the order in which a threshold lets lines through.
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue > b.rawValue }

    public var name: String {
        switch self {
        case .error: "error"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }

    public init?(name: String) {
        guard let level = LogLevel.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = level
    }
}

/// One line per event: confabd's log and confab-web's are this one. Under systemd
/// (`JOURNAL_STREAM` set) each line starts with the `<N>` syslog priority the journal
/// understands; otherwise with the level name. Message content never goes above debug; the
/// API key never goes anywhere.
///
/// Every line is made safe here, whatever its fields came from (ids and model names from a
/// model server, error texts, tool output, client names, a header a page chose): what
/// `redacting` takes out (the daemon's configured secrets) is taken out, and NUL, the C0 and
/// C1 controls, DEL, ESC, the bidi controls and the Unicode line separators are written as
/// escapes (`LogText`), so a line can neither end early (the journal also ends a line at NUL,
/// and a `<N>` after it would forge a priority) nor drive the terminal of whoever reads the log.
///
/// No I/O here: the line goes to `write`, which the program gives (standard error).
public struct Logger: Sendable {
    public typealias Level = LogLevel

    public var level: Level
    public let journal: Bool
    /// Applied to every line before it is escaped: the daemon sets it to replace each
    /// configured secret by `[secret]`.
    public var redacting: @Sendable (String) -> String = { $0 }
    private let write: @Sendable (String) -> Void

    public init(level: Level, journal: Bool, write: @escaping @Sendable (String) -> Void) {
        self.level = level
        self.journal = journal
        self.write = write
    }

    /// Whether a line of `level` would be written.
    public func logs(_ level: Level) -> Bool { level >= self.level }

    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard logs(level) else { return }
        write(Self.line(level, journal: journal, redacting(message())))
    }

    /// `text` as one line of the log at `level`, escaped, with its newline.
    public static func line(_ level: Level, journal: Bool, _ text: String) -> String {
        (journal ? "<\(level.rawValue)>" : "\(level.name): ") + LogText.escapingControls(text) + "\n"
    }

    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func notice(_ message: @autoclosure () -> String) { log(.notice, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
}
