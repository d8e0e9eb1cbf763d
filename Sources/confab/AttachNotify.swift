#if canImport(Glibc)
import Glibc
#endif
import ConfabProtocol
import Terminal

/// confab tells you when it needs you: attach sends the terminal's own notification
/// (`TerminalNotification`) when a call waits for your approval (always: nothing goes on
/// until somebody answers), and when a reply ends while the screen is left alone (no key
/// pressed for `CONFAB_NOTIFY_IDLE` seconds, 30 unless set; a reply you are watching while you
/// type needs no notice). `CONFAB_NOTIFY` chooses the kind: `osc9`, `osc777`, `bell`, `off`,
/// or `auto` (the default): OSC 9 or 777 where the terminal is known to take it, else off.
struct AttachNotifier {
    let kind: TerminalNotification.Kind
    let inTmux: Bool
    let idleMilliseconds: Int64

    /// The notifier the environment asks for; nil when notifications are off or standard
    /// output is no terminal. A setting that is none of the kinds is said once, and is off.
    static func fromEnvironment(warn: (String) -> Void) -> AttachNotifier? {
        guard isatty(1) != 0 else { return nil }
        let setting = Environment.get("CONFAB_NOTIFY")
        guard let kind = TerminalNotification.kind(setting: setting, term: Environment.get("TERM"),
                                                   termProgram: Environment.get("TERM_PROGRAM")) else {
            let kinds = TerminalNotification.Kind.allCases.map(\.rawValue).joined(separator: ", ")
            warn("CONFAB_NOTIFY=\(SafeText.singleLine(setting ?? "")) is none of \(kinds), auto: no notifications")
            return nil
        }
        guard kind != .off else { return nil }
        var idle: Int64 = 30
        if let text = Environment.get("CONFAB_NOTIFY_IDLE") {
            if let seconds = Int64(text.trimmed), seconds >= 0 {
                idle = seconds
            } else {
                warn("CONFAB_NOTIFY_IDLE=\(SafeText.singleLine(text)) is not a number of seconds: 30 it is")
            }
        }
        return AttachNotifier(kind: kind, inTmux: !(Environment.get("TMUX") ?? "").isEmpty, idleMilliseconds: idle * 1000)
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
