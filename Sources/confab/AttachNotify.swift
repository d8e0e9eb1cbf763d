#if canImport(Glibc)
import Glibc
#endif
import ClientConfig
import ConfabProtocol
import Posix
import Terminal

/// confab tells you when it needs you: attach sends the terminal's own notification
/// (`TerminalNotification`) when a call waits for your approval (always: nothing goes on
/// until somebody answers), and when a reply ends while the screen is left alone (no key
/// pressed for `notify_idle_seconds`, 30 unless set; a reply you are watching while you
/// type needs no notice). The kind is `osc9`, `osc777`, `bell`, `off`, or `auto` (the
/// default): OSC 9 or 777 where the terminal is known to take it, else off. Both are set in
/// `[client]` of config.toml (`ClientSettings`) and overridden by the environment
/// (`CONFAB_NOTIFY`, `CONFAB_NOTIFY_IDLE`), as `NotifySetting` decides.
struct AttachNotifier {
    let kind: TerminalNotification.Kind
    let inTmux: Bool
    let idleMilliseconds: Int64

    /// The notifier the config file and the environment ask for; nil when notifications are
    /// off or standard output is no terminal. The file is read only here, when attach opens a
    /// chat screen on a terminal, and not at all when the environment sets both. A file or
    /// setting that cannot be used is said once (with the file and line), and left out.
    static func fromConfig(warn: (String) -> Void) -> AttachNotifier? {
        guard isatty(1) != 0 else { return nil }
        let notifyVariable = Environment.get("CONFAB_NOTIFY"), idleVariable = Environment.get("CONFAB_NOTIFY_IDLE")
        let file = notifyVariable != nil && idleVariable != nil ? ClientSettings() : clientSettings(warn: warn)
        let setting = NotifySetting(file: file, notifyVariable: notifyVariable, idleVariable: idleVariable)
        setting.warnings.forEach(warn)
        guard let choice = setting.choice,
              let kind = TerminalNotification.kind(setting: choice, term: Environment.get("TERM"),
                                                   termProgram: Environment.get("TERM_PROGRAM")),
              kind != .off else { return nil }
        return AttachNotifier(kind: kind, inTmux: !(Environment.get("TMUX") ?? "").isEmpty,
                              idleMilliseconds: Int64(setting.idleSeconds) * 1000)
    }

    /// `[client]` of `$XDG_CONFIG_HOME/confab/config.toml` (the daemon's default file); a
    /// missing file says nothing, a file that cannot be read or used is said and ignored.
    private static func clientSettings(warn: (String) -> Void) -> ClientSettings {
        let path = ConfabPaths.current().configFile
        let bytes: [UInt8]
        do {
            bytes = try Files.readAll(path: path, limit: 16 << 20)
        } catch {
            if error.code != ENOENT { warn("\(SafeText.singleLine(path)): \(error): notifications as the environment says") }
            return ClientSettings()
        }
        do {
            return try ClientSettings(configText: String(decoding: bytes, as: UTF8.self), file: path)
        } catch {
            warn(SafeText.singleLine(error.description) + " (notifications as the environment says)")
            return ClientSettings()
        }
    }

    func notify(_ body: String) {
        Out.stdout(TerminalNotification.sequence(kind, title: "confab", body: body, inTmux: inTmux))
    }
}

extension AttachSession {
    /// `“title”`: the notifier takes every control character out and cuts it short.
    private var quotedTitle: String { "“" + title + "”" }

    /// A call waits for this screen's yes.
    func notifyApproval(_ call: ToolCall) {
        notifier?.notify("\(call.name) waits for your approval in \(quotedTitle)")
    }

    /// A reply followed here has ended: said when nobody has pressed a key here for a while.
    func notifyReplyEnded(_ end: ReplyEnd) {
        guard let notifier, Timestamp.now().milliseconds - lastKey.milliseconds >= notifier.idleMilliseconds else { return }
        let how: String
        switch end.outcome {
        case .complete: how = "the reply is complete"
        case .cutAtLengthLimit: how = "the reply was cut off at the length limit"
        case .failed: how = "the reply failed"
        case .cancelled: how = "the reply was cancelled"
        case .interrupted: how = "the reply was interrupted"
        case .conversationDeleted, .unshared: return
        }
        notifier.notify("\(how) in \(quotedTitle)")
    }
}
