import ConfabProtocol
import Posix
#if canImport(Glibc)
import Glibc
#endif

/// A stored message known by where it is in its log: what serving the conversation needs of it
/// without its text (id, place, role, status, what replaced it), and the byte range of the
/// record that holds it as it stands. Its text is read from the log when a page, an export or a
/// request needs it (`ConversationLog.readMessages`).
public struct StoredMessage: Sendable, Equatable {
    public let id: String
    public let order: MessageOrder
    public let role: Role
    public let status: MessageStatus
    /// Set by a later `superseded` record, or carried by the message's own record.
    public var supersededBy: String?
    /// The record's first byte in the log, and its length without the newline.
    public let offset: Int
    public let length: Int

    public var sequence: Int { order.sequence }
}

extension Replay {
    /// Folds a log's records as `fold` does, keeping of each message only where its latest record
    /// is (`StoredMessage`), not the message. Nil when the log needs the full fold: no header, or
    /// a reply left streaming (its text is in `reply.text` records, and it is finished as
    /// `interrupted` from them).
    static func outline(_ bytes: [UInt8], path: String, problems: inout [LoadProblem], goodSize: inout Int) -> OutlineResult {
        var state: ReplayedConversation?
        var stored: [StoredMessage] = []
        var index: [String: Int] = [:]
        var unfinished: Set<String> = []
        var owed: Set<String> = []
        var lineNumber = 0
        var start = 0
        func upsert(_ message: Message, offset: Int, length: Int) {
            owed.remove(message.id)
            guard let order = MessageID.order(of: message.id) else { return }
            if let position = index[message.id] {
                // As `fold`: a record rewriting a message does not carry what later records said of it.
                let entry = StoredMessage(id: message.id, order: order, role: message.role, status: message.status,
                                          supersededBy: message.supersededBy ?? stored[position].supersededBy, offset: offset, length: length)
                stored[position] = entry
            } else {
                index[message.id] = stored.count
                stored.append(StoredMessage(id: message.id, order: order, role: message.role, status: message.status,
                                            supersededBy: message.supersededBy, offset: offset, length: length))
            }
        }
        bytes.withUnsafeBufferPointer { buffer in
            while start < buffer.count {
                lineNumber += 1
                guard let newline = buffer[start...].firstIndex(of: 0x0A) else {
                    problems.append(LoadProblem(file: path, line: lineNumber,
                        message: "torn last line (\(buffer.count - start) bytes, no newline): dropped"))
                    break
                }
                let line = UnsafeBufferPointer(rebasing: buffer[start..<newline])
                defer {
                    start = newline + 1
                    goodSize = start
                }
                let record: LogRecord, at: Timestamp?
                if let head = MessageRecordHead.read(line) {
                    record = head.record
                    at = head.at
                } else {
                    guard let json = try? JSON.parse(line), let parsed = LogRecord(json: json) else {
                        problems.append(LoadProblem(file: path, line: lineNumber, message: "unreadable record: skipped"))
                        continue
                    }
                    record = parsed
                    at = json["at"]?.string.flatMap(Timestamp.init(rfc3339:))
                }
                guard state != nil else {
                    // The first record read must be the header, as for `fold`; without one the full
                    // read says what is wrong, as ever.
                    guard case .header(let header) = record else {
                        start = buffer.count
                        return
                    }
                    state = ReplayedConversation(header: header, title: header.title, updated: header.created, messages: [],
                                                 interruptedReplies: [], summary: LogSummary(header: header))
                    continue
                }
                state!.summary.apply(record, at: at)
                if let at, at > state!.updated { state!.updated = at }
                switch record {
                case .header, .replyText, .replyReasoning, .shared, .unshared: continue
                case .message(let message): upsert(message, offset: start, length: newline - start)
                case .replyStarted(let message):
                    upsert(message, offset: start, length: newline - start)
                    unfinished.insert(message.id)
                case .replyFinished(let message):
                    upsert(message, offset: start, length: newline - start)
                    unfinished.remove(message.id)
                case .title(let title): state!.title = title
                case .settings(let settings): state!.header.apply(settings)
                case .compaction(var compaction):
                    compaction.created = compaction.created ?? at
                    state!.compaction = compaction
                case .uncompaction: state!.compaction = nil
                case .superseded(let id, let by):
                    if let position = index[id] { stored[position].supersededBy = by }
                    if index[by] == nil { owed.insert(by) }
                }
            }
        }
        guard var state else { return .needsFullRead }
        guard unfinished.isEmpty else { return .needsFullRead }
        stored.sort { $0.order < $1.order }
        let lastReply = stored.filter { $0.role == .assistant }.map(\.sequence).max() ?? 0
        state.owedReplies = owed.compactMap(MessageID.sequence(of:)).filter { $0 > lastReply }.sorted().map(MessageID.make)
        state.stored = stored
        return .outlined(state)
    }

    enum OutlineResult {
        case outlined(ReplayedConversation)
        /// No header first, or a reply left streaming: `fold` deals with those.
        case needsFullRead
    }

    /// The message a record read back from `range` holds, as the conversation has it now
    /// (`supersededBy` from the outline: later records may have set it).
    static func message(in line: UnsafeBufferPointer<UInt8>, as stored: StoredMessage) -> Message? {
        guard let record = MessageRecordBody.read(line) ?? (try? JSON.parse(line)).flatMap(LogRecord.init(json:)) else { return nil }
        #if DEBUG
        let tree = (try? JSON.parse(line)).flatMap(LogRecord.init(json:))
        precondition(record == tree, "a message record read from its bytes differs from its tree: \(String(decoding: line, as: UTF8.self))")
        #endif
        switch record {
        case .message(var message), .replyStarted(var message), .replyFinished(var message):
            guard message.id == stored.id else { return nil }
            message.supersededBy = stored.supersededBy
            return message
        default: return nil
        }
    }
}

extension ConversationLog {
    /// The messages `stored` names, read from the log (in the order given). Ranges close together
    /// are read in one `pread`; the log is append-only while open, so they hold what was read.
    public func readMessages(_ stored: [StoredMessage]) throws(StoreError) -> [Message] {
        guard !stored.isEmpty else { return [] }
        guard isOpen else { throw StoreError(errno: EBADF, operation: "read \(path)") }
        return try Self.messages(stored, path: path) { offset, count throws(StoreError) in try read(offset: offset, count: count) }
    }

    /// The messages `stored` names, with `read` giving the bytes at an offset: ranges close
    /// together in one read, far apart one by one. Shared by the loop's read (the log's own
    /// descriptor) and the thread pool's (a descriptor of its own, `MessageReads.swift`).
    static func messages(_ stored: [StoredMessage], path: String,
                         read: (_ offset: Int, _ count: Int) throws(StoreError) -> [UInt8]) throws(StoreError) -> [Message] {
        guard !stored.isEmpty else { return [] }
        func exactly(_ offset: Int, _ count: Int) throws(StoreError) -> [UInt8] {
            let bytes = try read(offset, count)
            guard bytes.count == count else { throw StoreError(errno: EIO, operation: "read \(path): shorter than its records") }
            return bytes
        }
        let first = stored.map(\.offset).min()!
        let end = stored.map { $0.offset + $0.length }.max()!
        let wanted = stored.reduce(0) { $0 + $1.length }
        // Straight into the one array returned: a page is a thousand messages of several
        // hundred bytes each, and every array of them is fresh pages to fault in and copy.
        var messages: [Message] = []
        messages.reserveCapacity(stored.count)
        func take(_ message: Message?, _ entry: StoredMessage) throws(StoreError) {
            guard let message else {
                throw StoreError(errno: EIO, operation: "read \(path): message \(entry.id) at byte \(entry.offset) is not where the log held it")
            }
            messages.append(message)
        }
        if end - first <= 2 * wanted + (1 << 20) {
            let bytes = try exactly(first, end - first)
            try bytes.withUnsafeBufferPointer { (buffer) throws(StoreError) in
                for entry in stored {
                    let line = UnsafeBufferPointer(rebasing: buffer[(entry.offset - first)..<(entry.offset - first + entry.length)])
                    try take(Replay.message(in: line, as: entry), entry)
                }
            }
        } else {
            for entry in stored {
                try take(try exactly(entry.offset, entry.length).withUnsafeBufferPointer { Replay.message(in: $0, as: entry) }, entry)
            }
        }
        return messages
    }
}

/// A message record (`message`, `reply.started`, `reply.finished`) read straight from its bytes,
/// as far as the outline and the summary need it: the message without its text (the text is
/// checked to be a string, not kept). It accepts exactly the records `LogRecord(json:)` accepts
/// and gives the same fields; anything it is not sure of (another type, a key twice, a message
/// `Message(json:)` would refuse) is left to the full parse, which says what is wrong.
enum MessageRecordHead {
    static func read(_ line: UnsafeBufferPointer<UInt8>) -> (record: LogRecord, at: Timestamp?)? {
        var fields = Fields()
        let frame = MessageRecordFrame.scan(line) { (scanner) throws(JSONParseError) in
            guard try scanner.kind() == .object else { return }
            fields.messageIsObject = true
            try fields.readMessage(&scanner)
        }
        guard let frame, !fields.keys.repeated, fields.messageIsObject, let message = fields.message(),
              let record = frame.record(holding: message) else { return nil }
        return (record, frame.at.flatMap(Timestamp.init(rfc3339:)))
    }

    private struct Fields {
        var keys = KeysSeen()
        var messageIsObject = false
        var id: String?
        var conversation: String?
        var role: String?
        var contentIsString = false
        var status: String?
        var created: String?
        var supersededBy: String?
        var usage: JSON?
        var attachments: JSON?

        mutating func first(_ bit: UInt32) -> Bool { keys.first(bit) }

        mutating func readMessage(_ scanner: inout JSONScanner) throws(JSONParseError) {
            try scanner.members { (key, scanner) throws(JSONParseError) in
                if key == "id" {
                    guard first(10) else { return }
                    id = try scanner.readString()
                } else if key == "conversation" {
                    guard first(11) else { return }
                    conversation = try scanner.readString()
                } else if key == "role" {
                    guard first(12) else { return }
                    role = try scanner.readString()
                } else if key == "content" {
                    guard first(13) else { return }
                    contentIsString = try scanner.kind() == .string
                    try scanner.skipValue()
                } else if key == "status" {
                    guard first(14) else { return }
                    status = try scanner.readString()
                } else if key == "created" {
                    guard first(15) else { return }
                    created = try scanner.readString()
                } else if key == "superseded_by" {
                    guard first(16) else { return }
                    supersededBy = try scanner.readString()
                } else if key == "usage" {
                    guard first(17) else { return }
                    usage = try scanner.readValue()
                } else if key == "attachments" {
                    guard first(18) else { return }
                    attachments = try scanner.readValue()
                }
            }
        }

        /// The message as `Message(json:)` reads it, but for its text (and the fields neither the
        /// outline nor the summary look at); nil where it would refuse it.
        func message() -> Message? {
            guard let id, MessageID.order(of: id) != nil, let conversation, let role = role.flatMap(Role.init(rawValue:)),
                  contentIsString, let status = status.flatMap(MessageStatus.init(rawValue:)),
                  let created = created.flatMap(Timestamp.init(rfc3339:)) else { return nil }
            var message = Message(id: id, conversation: conversation, role: role, content: "", status: status, created: created,
                                  usage: usage.flatMap(Usage.init(json:)),
                                  supersededBy: supersededBy.flatMap { MessageID.sequence(of: $0) == nil ? nil : $0 },
                                  attachments: attachments?.array.map { $0.compactMap(Attachment.init(json:)) })
            let others = attachments?.array?.filter { item in
                Attachment(json: item) == nil && item["sha256"]?.string.map(Attachment.isDigest) == true
            } ?? []
            if !others.isEmpty { message.otherAttachments = others }
            return message
        }
    }
}
