import ConfabProtocol

/// A message record (`message`, `reply.started`, `reply.finished`) read whole straight from its
/// bytes: the message (`Message(scanning:)`) and the server's reasoning source (`replay`), as
/// `LogRecord(json:)` reads them, without a tree of the record. History pages and reply contexts
/// read thousands of records; their trees were most of the read. Anything it is not sure of
/// (another type, a key twice) is nil, and left to the full parse; a debug build checks every
/// record it reads against that parse (`Replay.message(in:as:)`).
enum MessageRecordBody {
    static func read(_ line: UnsafeBufferPointer<UInt8>) -> LogRecord? {
        var seen: UInt8 = 0
        var repeated = false
        func first(_ bit: UInt8) -> Bool {
            guard seen & (1 << bit) == 0 else {
                repeated = true
                return false
            }
            seen |= 1 << bit
            return true
        }
        var type: String?
        var version: Int?
        var message: Message?
        var replay: JSON?
        do {
            try JSONScanner.read(line) { (scanner) throws(JSONParseError) in
                try scanner.members { (key, scanner) throws(JSONParseError) in
                    if key == "type" {
                        guard first(0) else { return }
                        type = try scanner.readString()
                    } else if key == "v" {
                        guard first(1) else { return }
                        version = try scanner.readInt()
                    } else if key == "message" {
                        guard first(2) else { return }
                        message = try Message(scanning: &scanner)
                    } else if key == "replay" {
                        guard first(3) else { return }
                        replay = try scanner.readValue()
                    }
                }
            }
        } catch {
            return nil
        }
        guard !repeated, let type, let version, version <= LogRecord.formatVersion, var message else { return nil }
        message.reasoningSource = replay.flatMap(ReasoningSource.init(json:))
        switch type {
        case "message": return .message(message)
        case "reply.started": return .replyStarted(message)
        case "reply.finished": return .replyFinished(message)
        default: return nil
        }
    }
}
