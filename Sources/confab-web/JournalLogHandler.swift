import ConfabLog
import Logging
import Posix

/// swift-log's front (which Hummingbird logs through) on confabd's log: the same lines, the
/// same escaping, a syslog priority prefix under systemd (JOURNAL_STREAM set) and the level
/// spelled out elsewhere, no time stamp (the journal adds its own), to standard error.
/// Metadata follows the message as ` key=value`, escaped with it: a header a page chose (a
/// refused upgrade's `Origin`, a `Host`) can neither forge a line nor drive the terminal of
/// whoever reads the log.
struct JournalLogHandler: LogHandler {
    let label: String
    /// Writes whatever swift-log hands it: the level is swift-log's to check (`logLevel`).
    private let lines = ConfabLog.Logger(level: .debug, journal: ProcessEnvironment.variable("JOURNAL_STREAM") != nil) { line in
        _ = Files.writeAll(2, Array(line.utf8))
    }
    var logLevel: Logging.Logger.Level = .info
    var metadata: Logging.Logger.Metadata = [:]

    init(label: String) {
        self.label = label
    }

    subscript(metadataKey key: String) -> Logging.Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var text = "\(event.message)"
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }).sorted(by: { $0.key < $1.key }) {
            text += " \(key)=\(value)"
        }
        lines.log(Self.level(event.level), text)
    }

    static func level(_ level: Logging.Logger.Level) -> LogLevel {
        switch level {
        case .trace, .debug: .debug
        case .info: .info
        case .notice: .notice
        case .warning: .warning
        case .error, .critical: .error
        }
    }
}
