#if DEBUG
import ConfabProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Debug builds only (a release build has neither the type nor the variable): a misbehaviour of
/// the daemon's own, asked for by `CONFAB_DEBUG_FAULT`, for the long checks' self-tests, which
/// must see the matching oracle report it (docs/reliability.md). Each is narrow, and strikes on
/// the first, fourth, seventh … occasion of its kind in the process, so most of what the daemon
/// does is right and a check sees the fault within a short run:
/// - `drop-record`: a user message's record is left out of the log write that carries it, and
///   the write is reported whole (ConversationLog.write);
/// - `reply-byte`: a complete reply without tool calls is stored with one letter of its text
///   changed (ConversationLog.write), while clients are told the right text;
/// - `user-byte`: a user message is stored with one letter of its text changed (the same);
/// - `unstored-announce`: a send is answered and announced, and its message never appended
///   (Broker's `send`);
/// - `blob-removed`: a blob is unlinked once the message naming it is stored (Broker's `send`).
public enum DebugFault: String, CaseIterable, Sendable {
    case dropRecord = "drop-record"
    case replyByte = "reply-byte"
    case userByte = "user-byte"
    case unstoredAnnounce = "unstored-announce"
    case blobRemoved = "blob-removed"

    public static let variable = "CONFAB_DEBUG_FAULT"
    /// The fault asked for, read once; nil when none (or an unknown name, which confabd refuses at start).
    public static let current: DebugFault? = getenv(variable).flatMap { DebugFault(rawValue: String(cString: $0)) }
    /// Occasions of the current fault's kind so far (the loop thread's alone).
    nonisolated(unsafe) private static var occasions = 0

    /// Whether this occasion of `fault`'s kind misbehaves: always false unless it is the one asked for.
    public static func strikes(_ fault: DebugFault) -> Bool {
        guard current == fault else { return false }
        occasions += 1
        return occasions % 3 == 1
    }

    /// The records a log write puts in the file in place of `records`.
    static func stored(_ records: [LogRecord]) -> [LogRecord] {
        guard current == .dropRecord || current == .replyByte || current == .userByte else { return records }
        return records.compactMap { record in
            switch record {
            case .message(var message) where message.role == .user:
                if strikes(.dropRecord) { return nil }
                if strikes(.userByte) { message.content = changedLetter(message.content) }
                return .message(message)
            case .replyFinished(var message) where message.status == .complete && (message.toolCalls ?? []).isEmpty:
                if strikes(.replyByte) { message.content = changedLetter(message.content) }
                return .replyFinished(message)
            default:
                return record
            }
        }
    }

    /// `text` with the case of its last ASCII letter turned (still valid UTF-8, the same length).
    static func changedLetter(_ text: String) -> String {
        var bytes = Array(text.utf8)
        guard let at = bytes.lastIndex(where: { ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A }) else { return text + "!" }
        bytes[at] ^= 0x20
        return String(decoding: bytes, as: UTF8.self)
    }
}
#endif
