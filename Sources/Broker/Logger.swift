import ConfabProtocol
import Posix
import Tools

/// One line per event on stderr. Under systemd (`JOURNAL_STREAM` set) each line starts
/// with the `<N>` syslog priority the journal understands; otherwise with the level name.
/// Message content never goes above debug; the API key never goes anywhere.
///
/// Every line is made safe here, whatever its fields came from (ids and model names from a
/// model server, error texts, tool output, client names): every configured secret is
/// redacted, and NUL, the C0 and C1 controls, DEL, ESC, the bidi controls and the Unicode
/// line separators are written as escapes, so a line can neither end early (the journal also
/// ends a line at NUL, and a `<N>` after it would forge a priority) nor drive the terminal of
/// whoever reads the log.
public struct Logger: Sendable {
    public enum Level: Int, Comparable, Sendable, CaseIterable {
        case error = 3, warning = 4, notice = 5, info = 6, debug = 7
        public static func < (a: Level, b: Level) -> Bool { a.rawValue > b.rawValue }
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
            guard let level = Level.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
            self = level
        }
    }

    public var level: Level
    public let journal: Bool
    /// The configured secrets, replaced by `[secret]` in every line.
    public var secrets: SecretRedactor = .none

    public init(level: Level, journal: Bool) {
        self.level = level
        self.journal = journal
    }

    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard level >= self.level else { return }
        let text = Self.escapingControls(secrets.redacting(message()))
        let line = (journal ? "<\(level.rawValue)>" : "\(level.name): ") + text + "\n"
        // Nowhere to report a failed write of the daemon's own log.
        _ = Files.writeAll(2, Array(line.utf8))
    }

    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func notice(_ message: @autoclosure () -> String) { log(.notice, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
}

extension Logger {
    /// The escaping every log line gets (LogText, shared with confab-web's log).
    public static func escapingControls(_ text: String) -> String {
        LogText.escapingControls(text)
    }
}
