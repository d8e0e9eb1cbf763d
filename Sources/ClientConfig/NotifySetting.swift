import ConfabProtocol

/// How attach notifies, from `[client]` of the file and the client's environment, the
/// environment winning: `CONFAB_NOTIFY` over `client.notify`, `CONFAB_NOTIFY_IDLE` over
/// `client.notify_idle_seconds`. What neither says is `auto` and 30 seconds.
public struct NotifySetting: Equatable, Sendable {
    public static let defaultIdleSeconds = 30

    /// One of `ClientSettings.notifyChoices`; nil when the environment names none of them
    /// (said in `warnings`; no notifications then, as a kind nobody can tell is meant).
    public var choice: String?
    public var idleSeconds: Int
    /// What to tell the person once, on standard error.
    public var warnings: [String] = []

    public init(choice: String?, idleSeconds: Int, warnings: [String] = []) {
        self.choice = choice
        self.idleSeconds = idleSeconds
        self.warnings = warnings
    }

    public init(file: ClientSettings, notifyVariable: String?, idleVariable: String?) {
        choice = file.notify ?? "auto"
        idleSeconds = file.notifyIdleSeconds ?? Self.defaultIdleSeconds
        if let setting = notifyVariable {
            let lowered = setting.lowercased()
            if ClientSettings.notifyChoices.contains(lowered) {
                choice = lowered
            } else {
                choice = nil
                warnings.append("CONFAB_NOTIFY=\(ClientSettings.shown(setting)) is none of \(ClientSettings.notifyChoices.joined(separator: ", ")): no notifications")
            }
        }
        if let text = idleVariable {
            let trimmed = text.trimmingWhitespace
            if let seconds = Int(trimmed), seconds >= 0, seconds <= ClientSettings.maxIdleSeconds {
                idleSeconds = seconds
            } else {
                warnings.append("CONFAB_NOTIFY_IDLE=\(ClientSettings.shown(text)) is not a number of seconds from 0 to \(ClientSettings.maxIdleSeconds): \(idleSeconds) it is")
            }
        }
    }
}
