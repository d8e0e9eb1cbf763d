import Posix

/// One line per event on stderr. Under systemd (`JOURNAL_STREAM` set) each line starts
/// with the `<N>` syslog priority the journal understands; otherwise with the level name.
/// Message content never goes above debug; the API key never goes anywhere.
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

    public init(level: Level, journal: Bool) {
        self.level = level
        self.journal = journal
    }

    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard level >= self.level else { return }
        // One event, one line: text from outside (an upstream's error message) may hold line breaks.
        let text = message().replacingLineBreaks()
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

extension String {
    fileprivate func replacingLineBreaks() -> String {
        guard contains(where: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else { return self }
        var out = ""
        for character in self {
            switch character {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\r\n": out += "\\r\\n"
            default: out.append(character)
            }
        }
        return out
    }
}
