import ConfabProtocol

/// One line of confab-web's log as the journal takes it, as confabd writes its own: a syslog
/// priority prefix (`<3>` error … `<7>` debug) under systemd, else the level spelled out; no
/// time stamp (the journal adds its own). The whole line, message and metadata, is escaped as
/// the daemon's are (LogText): a header a page chose (a refused upgrade's `Origin`) can
/// neither forge a line nor drive the terminal of whoever reads the log.
public enum GatewayLog {
    public static func line(priority: Int, levelName: String, journal: Bool, message: String,
                            metadata: [(key: String, value: String)]) -> String {
        var text = message
        for (key, value) in metadata { text += " \(key)=\(value)" }
        return (journal ? "<\(priority)>" : "\(levelName): ") + LogText.escapingControls(text) + "\n"
    }
}
