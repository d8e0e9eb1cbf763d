import ConfabProtocol

/// A message record (`message`, `reply.started`, `reply.finished`) read whole straight from its
/// bytes: the message (`Message(scanning:)`) and the server's reasoning source (`replay`), as
/// `LogRecord(json:)` reads them, without a tree of the record. History pages and reply contexts
/// read thousands of records; their trees were most of the read. Anything it is not sure of
/// (another type, a key twice) is nil, and left to the full parse; a debug build checks every
/// record it reads against that parse (`Replay.message(in:as:)`).
enum MessageRecordBody {
    static func read(_ line: UnsafeBufferPointer<UInt8>) -> LogRecord? {
        var message: Message?
        let frame = MessageRecordFrame.scan(line) { (scanner) throws(JSONParseError) in message = try Message(scanning: &scanner) }
        guard let frame, var message else { return nil }
        message.reasoningSource = frame.replay.flatMap(ReasoningSource.init(json:))
        return frame.record(holding: message)
    }
}

/// The members of a message record around its message (`type`, `v`, `at`, `replay`), read by
/// the scanner for `MessageRecordHead` (the outline's, without the text) and `MessageRecordBody`
/// (the whole message), which differ only in how they read the `message` member.
struct MessageRecordFrame {
    var type: String?
    var version: Int?
    var at: String?
    var replay: JSON?

    /// `line`'s members, the scanner handed to `message` on the `message` member; nil when the
    /// text is not JSON or one of these keys is repeated (the tree keeps the first, and so would
    /// this, but the full parse is left to judge such a record).
    static func scan(_ line: UnsafeBufferPointer<UInt8>,
                     message: (inout JSONScanner) throws(JSONParseError) -> Void) -> MessageRecordFrame? {
        var frame = MessageRecordFrame()
        var keys = KeysSeen()
        do {
            try JSONScanner.read(line) { (scanner) throws(JSONParseError) in
                try scanner.members { (key, scanner) throws(JSONParseError) in
                    if key == "type" {
                        guard keys.first(0) else { return }
                        frame.type = try scanner.readString()
                    } else if key == "v" {
                        guard keys.first(1) else { return }
                        frame.version = try scanner.readInt()
                    } else if key == "at" {
                        guard keys.first(2) else { return }
                        frame.at = try scanner.readString()
                    } else if key == "message" {
                        guard keys.first(3) else { return }
                        try message(&scanner)
                    } else if key == "replay" {
                        guard keys.first(4) else { return }
                        frame.replay = try scanner.readValue()
                    }
                }
            }
        } catch {
            return nil
        }
        return keys.repeated ? nil : frame
    }

    /// The record holding `message`, when `type` and `v` make it a message record this version reads.
    func record(holding message: Message) -> LogRecord? {
        guard let type, let version, version <= LogRecord.formatVersion else { return nil }
        switch type {
        case "message": return .message(message)
        case "reply.started": return .replyStarted(message)
        case "reply.finished": return .replyFinished(message)
        default: return nil
        }
    }
}

/// Which keys of an object have been met, by number: a key met again is `repeated`.
struct KeysSeen {
    private var seen: UInt32 = 0
    private(set) var repeated = false

    /// Whether key number `bit` is met for the first time.
    mutating func first(_ bit: UInt32) -> Bool {
        if seen & (1 << bit) != 0 {
            repeated = true
            return false
        }
        seen |= 1 << bit
        return true
    }
}
