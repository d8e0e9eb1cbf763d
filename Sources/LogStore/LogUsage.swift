import CBytes
import ConfabProtocol
import Posix

/// One reply's tokens as its latest ending recorded them, with what prices it: the provider
/// that served it and the model that wrote it.
public struct ReplyUsage: Equatable, Sendable {
    public var conversation: String
    public var message: String
    public var provider: String
    public var model: String
    /// When the reply began: a reply counts on the day it was asked for.
    public var created: Timestamp
    public var usage: Usage

    public init(conversation: String, message: String, provider: String, model: String, created: Timestamp, usage: Usage) {
        self.conversation = conversation
        self.message = message
        self.provider = provider
        self.model = model
        self.created = created
        self.usage = usage
    }

    /// The replies among `messages` that have a usage (superseded ones too: they were paid for),
    /// in message order. `model` stands for a reply that names none (logs of early versions).
    public static func of(_ messages: some Sequence<Message>, conversation: String, provider: String, model: String) -> [ReplyUsage] {
        messages.compactMap { message in
            guard message.role == .assistant, let usage = message.usage else { return nil }
            return ReplyUsage(conversation: conversation, message: message.id, provider: provider, model: message.model ?? model,
                              created: message.created, usage: usage)
        }
    }
}

extension LogStore {
    /// Every reply's usage in the log at `path`, read without opening it for writing and
    /// without folding it: only its header and its `reply.finished` records are parsed (found
    /// by `memmem`), the latest per reply. Touches nothing but the file, so it runs on a thread.
    /// Nil when the file cannot be read or has no header.
    public static func replyUsages(path: String) -> [ReplyUsage]? {
        guard let bytes = try? Files.readAll(path: path) else { return nil }
        guard let firstNewline = bytes.firstIndex(of: 0x0A),
              let headerJSON = try? JSON.parse(bytes[..<firstNewline]), case .header(let header)? = LogRecord(json: headerJSON) else {
            return nil
        }
        var latest: [String: Message] = [:]
        let needle = Array("\"reply.finished\"".utf8)
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            let count = buffer.count
            var position = firstNewline + 1
            while position < count {
                let hit = needle.withUnsafeBytes { cbytes_memmem(base + position, count - position, $0.baseAddress, $0.count) }
                guard let hit else { break }
                let at = UnsafePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - base
                var start = at
                while start > position, base[start - 1] != 0x0A { start -= 1 }
                var end = at
                while end < count, base[end] != 0x0A { end += 1 }
                // A torn last line (no newline yet) is not a record.
                if end < count, let json = try? JSON.parse(buffer[start..<end]), case .replyFinished(let message)? = LogRecord(json: json) {
                    latest[message.id] = message
                }
                position = end + 1
            }
        }
        let replies = latest.values.sorted { $0.order < $1.order }
        return ReplyUsage.of(replies, conversation: header.id, provider: header.provider ?? ConversationInfo.defaultProvider, model: header.model)
    }
}
