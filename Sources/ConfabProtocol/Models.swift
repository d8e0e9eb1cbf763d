#if canImport(Glibc)
import Glibc
#endif

/// Milliseconds since the Unix epoch; written as RFC 3339 UTC with milliseconds.
public struct Timestamp: Comparable, Hashable, Sendable, CustomStringConvertible {
    public let milliseconds: Int64
    public init(milliseconds: Int64) { self.milliseconds = milliseconds }

    public static func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(milliseconds: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.milliseconds < b.milliseconds }

    /// `2026-11-22T04:15:30.123Z`
    public var description: String {
        String(unsafeUninitializedCapacity: 32) { buffer in write(to: buffer) }
    }

    /// `description`'s bytes appended to `out`, without making the string: a history page
    /// writes a thousand of them.
    public func write(into out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { buffer in
            out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[..<write(to: buffer)]))
        }
    }

    /// Writes `description` into `buffer` (32 bytes) and returns its length. The civil date
    /// by days since the epoch (proleptic Gregorian, as `gmtime_r` reckons it); a year outside
    /// 0...9999 as `gmtime_r` and `String` give it, padded to four digits.
    private func write(to buffer: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let days = milliseconds.floorDiv(86_400_000)
        let inDay = Int(milliseconds - days * 86_400_000)
        let (year, month, day) = Self.civil(fromDays: days)
        var length = 0
        func put(_ byte: UInt8) {
            buffer[length] = byte
            length += 1
        }
        func digits(_ value: Int, _ width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            var value = value
            for _ in 0..<width {
                put(UInt8(48 + value / divisor))
                value %= divisor
                divisor /= 10
            }
        }
        if (0...9999).contains(year) {
            digits(year, 4)
        } else {
            let text = String(year)
            for byte in (String(repeating: "0", count: max(0, 4 - text.utf8.count)) + text).utf8 { put(byte) }
        }
        put(UInt8(ascii: "-"))
        digits(month, 2)
        put(UInt8(ascii: "-"))
        digits(day, 2)
        put(UInt8(ascii: "T"))
        digits(inDay / 3_600_000, 2)
        put(UInt8(ascii: ":"))
        digits(inDay / 60_000 % 60, 2)
        put(UInt8(ascii: ":"))
        digits(inDay / 1000 % 60, 2)
        put(UInt8(ascii: "."))
        digits(inDay % 1000, 3)
        put(UInt8(ascii: "Z"))
        return length
    }

    /// Year, month (1...12) and day (1...31) of `days` since 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`, exact for every Int64 day a millisecond count reaches).
    public static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shifted + 2) / 5 + 1
        let month = shifted < 10 ? shifted + 3 : shifted - 9
        return (Int(yearOfEra + era * 400 + (month <= 2 ? 1 : 0)), Int(month), Int(day))
    }

    /// Days since 1970-01-01 of a civil date (`days_from_civil`, the inverse of `civil`).
    static func days(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Reads what `description` writes (and the same without fraction); nil for anything else,
    /// a date that does not exist (2026-02-30) or a leap second that ends the day among them.
    public init?(rfc3339 text: String) {
        var text = text
        guard let value = text.withUTF8({ Self.milliseconds(rfc3339: $0) }) else { return nil }
        self.milliseconds = value
    }

    private static func milliseconds(rfc3339 bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard bytes.count == 20 || bytes.count == 24, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for i in range {
                let digit = Int(bytes[i]) - 48
                guard (0...9).contains(digit) else { return nil }
                value = value * 10 + digit
            }
            return value
        }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var millis = 0
        if bytes.count == 24 {
            guard bytes[19] == UInt8(ascii: "."), let fraction = number(20..<23) else { return nil }
            millis = fraction
        }
        // A day past its month's end, or a leap second at 23:59:60, would roll over into the
        // next day: not the date written, so not a timestamp (as `timegm` then `gmtime_r` found).
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard day <= monthDays, !(second == 60 && hour == 23 && minute == 59) else { return nil }
        let seconds = days(year: year, month: month, day: day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return seconds * 1000 + Int64(millis)
    }
}

extension Int64 {
    fileprivate func floorDiv(_ divisor: Int64) -> Int64 {
        let q = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? q - 1 : q
    }
}

/// Ids the daemon makes. They become file names, so what a client sends is checked
/// against exactly the shape the daemon makes before it goes anywhere near a path.
public enum ConversationID {
    static let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
    public static let length = 12

    public static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(decoding: (0..<length).map { _ in alphabet[Int(generator.next(upperBound: UInt32(alphabet.count)))] }, as: UTF8.self)
    }

    /// True for the start of a possible id (what a user may type as a shorthand).
    public static func isValidPrefix(_ text: String) -> Bool {
        let bytes = text.utf8
        return !bytes.isEmpty && bytes.count <= length && bytes.allSatisfy { alphabet.contains($0) }
    }

    public static func isValid(_ id: String) -> Bool {
        let bytes = id.utf8
        return bytes.count == length && bytes.allSatisfy { alphabet.contains($0) }
    }
}

/// Message ids are `m` and a sequence number within the conversation: `m1`, `m2`, …; the
/// messages a reply's tool calls add share its number and count on after a dot: `m2.1`,
/// `m2.2`, … (the reply `m2` asked for tools, `m2.1` is a result, `m2.2` the next turn).
/// Their order is the conversation's order.
public enum MessageID {
    public static func make(_ sequence: Int) -> String { "m\(sequence)" }

    /// The `step`th message after the first of reply `sequence`; step 0 is `m<sequence>` itself.
    public static func make(_ sequence: Int, step: Int) -> String { step == 0 ? "m\(sequence)" : "m\(sequence).\(step)" }

    /// The sequence number of `m4` and of `m4.2` (4); nil for anything that is not a message id.
    public static func sequence(of id: String) -> Int? { order(of: id)?.sequence }

    /// Where the message stands in its conversation; nil for anything that is not a message id.
    public static func order(of id: String) -> MessageOrder? { order(utf8: id.utf8) }

    /// The same, of an id's UTF-8 bytes where they lie (a log's tail scan reads one for every
    /// record before its window, without making a string of each).
    @inlinable
    public static func order(utf8 bytes: some Collection<UInt8>) -> MessageOrder? {
        // `m`, then a number of 1 to 15 digits without a leading zero, then optionally `.` and
        // another such number. Read byte by byte: a long log reads one for every record.
        guard bytes.count >= 2, bytes.count <= 24, bytes.first == UInt8(ascii: "m") else { return nil }
        var sequence = 0
        var value = 0
        var digits = 0
        var inStep = false
        for byte in bytes.dropFirst() {
            if byte == UInt8(ascii: ".") {
                guard !inStep, digits > 0 else { return nil }
                inStep = true
                sequence = value
                value = 0
                digits = 0
                continue
            }
            guard (48...57).contains(byte), digits > 0 || byte != 48, digits < 15 else { return nil }
            digits += 1
            value = value * 10 + Int(byte - 48)
        }
        guard digits > 0 else { return nil }
        return inStep ? MessageOrder(sequence: sequence, step: value) : MessageOrder(sequence: value, step: 0)
    }
}

/// A message id's place: by sequence number, then by step within a reply's tool calls.
public struct MessageOrder: Comparable, Hashable, Sendable {
    public var sequence: Int
    public var step: Int

    public init(sequence: Int, step: Int = 0) {
        self.sequence = sequence
        self.step = step
    }

    public static func < (a: MessageOrder, b: MessageOrder) -> Bool {
        (a.sequence, a.step) < (b.sequence, b.step)
    }

    public var id: String { MessageID.make(sequence, step: step) }
}

public enum MessageStatus: String, Sendable, CaseIterable {
    case complete, streaming, cancelled, failed, interrupted
}

/// Who sent a message or asked for a reply. A person at a terminal is its uid and login (what
/// the kernel vouches for) and the name it chose; a share link's holder (the gateway's
/// connection that declared the link at `hello`) is the link: `link` is its id, `login` is
/// `link:ID`, and `uid` is the uid of the gateway that relayed it, never the owner's own say.
public struct Author: Equatable, Sendable {
    public var uid: UInt32
    public var login: String
    public var name: String
    public var clientID: String
    /// The share link this came through; nil for a person on the socket.
    public var link: String?

    public init(uid: UInt32, login: String, name: String, clientID: String, link: String? = nil) {
        self.uid = uid
        self.login = login
        self.name = name
        self.clientID = clientID
        self.link = link
    }

    /// The owner itself: its uid and no share link between.
    public func isOwner(_ ownUID: UInt32) -> Bool { uid == ownUID && link == nil }

    public var json: JSON {
        var object: [String: JSON] = ["uid": .int(Int(uid)), "login": .string(login), "name": .string(name), "client_id": .string(clientID)]
        if let link { object["link"] = .string(link) }
        return .object(object)
    }

    public init?(json: JSON) {
        guard let uid = json["uid"]?.int, let login = json["login"]?.string, let name = json["name"]?.string else { return nil }
        self.init(uid: UInt32(clamping: uid), login: login, name: name, clientID: json["client_id"]?.string ?? "", link: json["link"]?.string)
    }
}

public struct Usage: Equatable, Sendable {
    /// Every input token of the request, as the server counts them: cache reads and cache
    /// writes included (Anthropic reports those apart; they are added here), so the context
    /// budget can calibrate on it. What was billed at full input price is
    /// `promptTokens - (cacheReadTokens ?? 0) - (cacheWriteTokens ?? 0)` (`uncachedPromptTokens`).
    public var promptTokens: Int
    /// Every output token, reasoning included (`reasoningTokens` is a part of it).
    public var completionTokens: Int
    public var totalTokens: Int
    /// Counted by confabd, not reported by the upstream (see `estimate`).
    public var isEstimated: Bool
    /// The part of `completionTokens` the model spent thinking, when the server says
    /// (`completion_tokens_details.reasoning_tokens`), or confabd's estimate of it.
    public var reasoningTokens: Int?
    /// The part of `promptTokens` read from the server's prompt cache
    /// (`prompt_tokens_details.cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`,
    /// Anthropic's `cache_read_input_tokens`).
    public var cacheReadTokens: Int?
    /// The part of `promptTokens` written to the server's prompt cache (Anthropic's
    /// `cache_creation_input_tokens`).
    public var cacheWriteTokens: Int?

    public init(promptTokens: Int, completionTokens: Int, totalTokens: Int, isEstimated: Bool = false,
                reasoningTokens: Int? = nil, cacheReadTokens: Int? = nil, cacheWriteTokens: Int? = nil) {
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.totalTokens = totalTokens
        self.isEstimated = isEstimated
        self.reasoningTokens = reasoningTokens
        self.cacheReadTokens = cacheReadTokens
        self.cacheWriteTokens = cacheWriteTokens
    }

    /// Input tokens billed at the full price: neither read from nor written to a cache.
    public var uncachedPromptTokens: Int {
        max(0, promptTokens - (cacheReadTokens ?? 0) - (cacheWriteTokens ?? 0))
    }

    /// For a server that reports no usage (llama.cpp's, some proxies), so totals still add up:
    /// about four bytes of UTF-8 text per token, plus 4 tokens per prompt message and 3 for the
    /// reply's priming, after OpenAI's accounting of its chat format. Rough, and marked so.
    /// Reasoning, when there was some, counts as output (servers bill it so).
    public static func estimate(prompt: [String], completion: String, reasoning: String = "") -> Usage {
        func tokens(_ text: String) -> Int { (text.utf8.count + 3) / 4 }
        let promptTokens = prompt.reduce(3) { $0 + 4 + tokens($1) }
        let reasoningTokens = tokens(reasoning)
        let completionTokens = tokens(completion) + reasoningTokens
        return Usage(promptTokens: promptTokens, completionTokens: completionTokens,
                     totalTokens: promptTokens + completionTokens, isEstimated: true,
                     reasoningTokens: reasoning.isEmpty ? nil : reasoningTokens)
    }

    /// The usage of a reply made in several requests (a continued one); nil when neither
    /// says anything, estimated when either part was.
    public static func sum(_ a: Usage?, _ b: Usage?) -> Usage? {
        guard let a else { return b }
        guard let b else { return a }
        func add(_ x: Int?, _ y: Int?) -> Int? { x == nil && y == nil ? nil : (x ?? 0) + (y ?? 0) }
        return Usage(promptTokens: a.promptTokens + b.promptTokens, completionTokens: a.completionTokens + b.completionTokens,
                     totalTokens: a.totalTokens + b.totalTokens, isEstimated: a.isEstimated || b.isEstimated,
                     reasoningTokens: add(a.reasoningTokens, b.reasoningTokens),
                     cacheReadTokens: add(a.cacheReadTokens, b.cacheReadTokens),
                     cacheWriteTokens: add(a.cacheWriteTokens, b.cacheWriteTokens))
    }

    public var json: JSON {
        var members: [String: JSON] = ["prompt_tokens": .int(promptTokens), "completion_tokens": .int(completionTokens),
                                       "total_tokens": .int(totalTokens)]
        if isEstimated { members["estimated"] = .bool(true) }
        if let reasoningTokens { members["reasoning_tokens"] = .int(reasoningTokens) }
        if let cacheReadTokens { members["cache_read_tokens"] = .int(cacheReadTokens) }
        if let cacheWriteTokens { members["cache_write_tokens"] = .int(cacheWriteTokens) }
        return .object(members)
    }

    public init?(json: JSON) {
        guard let prompt = json["prompt_tokens"]?.int, let completion = json["completion_tokens"]?.int else { return nil }
        func count(_ key: String) -> Int? { json[key]?.int.flatMap { $0 >= 0 ? $0 : nil } }
        self.init(promptTokens: prompt, completionTokens: completion, totalTokens: json["total_tokens"]?.int ?? prompt + completion,
                  isEstimated: json["estimated"]?.bool == true, reasoningTokens: count("reasoning_tokens"),
                  cacheReadTokens: count("cache_read_tokens"), cacheWriteTokens: count("cache_write_tokens"))
    }
}

/// What the daemon keeps of a turn's reasoning to send back, and never sends to a client: which
/// API, provider and model made it (one server's reasoning never goes to another), and the items
/// that API wants back exactly as they came (Anthropic's thinking blocks with their signatures and
/// its redacted-thinking blocks, Responses' encrypted reasoning items). Stored in the log record
/// beside the message (`"replay"`), not in the message's JSON.
public struct ReasoningSource: Equatable, Sendable {
    public var api: String
    public var provider: String
    public var model: String
    public var items: [JSON]

    public init(api: String, provider: String, model: String, items: [JSON] = []) {
        self.api = api
        self.provider = provider
        self.model = model
        self.items = items
    }

    public var json: JSON {
        var object: [String: JSON] = ["api": .string(api), "provider": .string(provider), "model": .string(model)]
        if !items.isEmpty { object["items"] = .array(items) }
        return .object(object)
    }

    public init?(json: JSON) {
        guard let api = json["api"]?.string, let provider = json["provider"]?.string, let model = json["model"]?.string
        else { return nil }
        self.init(api: api, provider: provider, model: model, items: json["items"]?.array ?? [])
    }
}

/// A reply's reasoning as clients see it: the thought's text (what the server streamed as
/// `reasoning_content`, `reasoning`, Anthropic's `thinking`, a Responses reasoning summary, or a
/// `<think>` block), when the model began and stopped thinking, and how many blocks the server
/// sent encrypted (Anthropic's `redacted_thinking`: kept to be sent back, never shown).
/// What must be sent back to the server (signatures, encrypted items) is the daemon's own
/// business, kept in the log beside it, and never on the wire to clients.
public struct Reasoning: Equatable, Sendable {
    public var text: String
    /// The first piece of reasoning arrived; moved later by each pause in the thinking (see
    /// `resume(at:)`), so that `ended - started` is the time spent thinking.
    public var started: Timestamp
    /// The first piece of the answer (text or a tool call) after the latest piece of reasoning
    /// arrived, or the reply ended; nil while the model is still thinking.
    public var ended: Timestamp?
    /// Blocks of reasoning the server sent only encrypted.
    public var redactedBlocks: Int

    public init(text: String, started: Timestamp, ended: Timestamp? = nil, redactedBlocks: Int = 0) {
        self.text = text
        self.started = started
        self.ended = ended
        self.redactedBlocks = redactedBlocks
    }

    /// The model thinks again after it had begun its answer (interleaved thinking, or a
    /// continued reply): the thought is open again, and its clock goes on from where it
    /// stopped rather than counting the pause. Every end (the daemon, each client, the page)
    /// applies the same rule, so their clocks agree.
    public mutating func resume(at now: Timestamp) {
        guard let ended else { return }
        started = Timestamp(milliseconds: started.milliseconds + max(0, now.milliseconds - ended.milliseconds))
        self.ended = nil
    }

    /// Whole seconds spent thinking, as of `now` while it goes on.
    public func seconds(now: Timestamp) -> Int {
        Int(max(0, (ended ?? now).milliseconds - started.milliseconds) / 1000)
    }

    public var json: JSON {
        var object: [String: JSON] = ["text": .string(text), "started": .string(started.description)]
        if let ended { object["ended"] = .string(ended.description) }
        if redactedBlocks > 0 { object["redacted_blocks"] = .int(redactedBlocks) }
        return .object(object)
    }

    public init?(json: JSON) {
        guard let text = json["text"]?.string, let started = json["started"]?.string.flatMap(Timestamp.init(rfc3339:))
        else { return nil }
        self.init(text: text, started: started, ended: json["ended"]?.string.flatMap(Timestamp.init(rfc3339:)),
                  redactedBlocks: max(0, json["redacted_blocks"]?.int ?? 0))
    }
}

/// What a reply's request held when a context budget applied: the messages sent (the system
/// prompt included, a continuation's own two not), the stored turns left out, and the estimated
/// prompt tokens of what was sent.
public struct ContextInfo: Equatable, Sendable {
    public var messages: Int
    public var dropped: Int
    public var estimatedTokens: Int
    /// The messages a summary stands for in the request (`m1…m40`), when one is in force.
    public var summarised: String?
    /// Why the summary this reply waited for (`compact_at`) was not made: the request was
    /// trimmed as without one.
    public var compactionFailed: String?

    public init(messages: Int, dropped: Int, estimatedTokens: Int, summarised: String? = nil, compactionFailed: String? = nil) {
        self.messages = messages
        self.dropped = dropped
        self.estimatedTokens = estimatedTokens
        self.summarised = summarised
        self.compactionFailed = compactionFailed
    }

    public var json: JSON {
        var object: [String: JSON] = ["messages": .int(messages), "dropped": .int(dropped), "estimated_tokens": .int(estimatedTokens)]
        if let summarised { object["summarised"] = .string(summarised) }
        if let compactionFailed { object["compaction_failed"] = .string(compactionFailed) }
        return .object(object)
    }

    public init?(json: JSON) {
        guard let messages = json["messages"]?.int, let dropped = json["dropped"]?.int,
              let estimated = json["estimated_tokens"]?.int else { return nil }
        self.init(messages: messages, dropped: dropped, estimatedTokens: estimated, summarised: json["summarised"]?.string,
                  compactionFailed: json["compaction_failed"]?.string)
    }
}

/// Why a reply did not complete.
public struct MessageError: Equatable, Sendable, Error {
    public var code: ReplyErrorCode
    public var message: String
    /// The upstream's HTTP status, when the failure came from one.
    public var status: Int?

    public init(code: ReplyErrorCode, message: String, status: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
    }

    public var json: JSON {
        var object: [String: JSON] = ["code": .string(code.rawValue), "message": .string(message)]
        if let status { object["status"] = .int(status) }
        return .object(object)
    }

    public init?(json: JSON) {
        guard let code = json["code"]?.string.flatMap(ReplyErrorCode.init(rawValue:)), let message = json["message"]?.string
        else { return nil }
        self.init(code: code, message: message, status: json["status"]?.int)
    }
}

/// A tool the model asked to have called: `arguments` is the JSON text it wrote, kept as written.
public struct ToolCall: Equatable, Sendable {
    public var id: String
    public var name: String
    public var arguments: String

    public init(id: String, name: String, arguments: String) {
        self.id = id
        self.name = name
        self.arguments = arguments
    }

    public var json: JSON { ["id": .string(id), "name": .string(name), "arguments": .string(arguments)] }

    public init?(json: JSON) {
        guard let id = json["id"]?.string, let name = json["name"]?.string, let arguments = json["arguments"]?.string else { return nil }
        self.init(id: id, name: name, arguments: arguments)
    }
}

/// Where a call that needs a person's yes stands.
public enum ToolApprovalState: String, Sendable, CaseIterable {
    case pending, approved, denied
}

/// What a tool message says beyond any message's fields: which call it answers and how it went.
public struct ToolResult: Equatable, Sendable {
    public var callID: String
    public var name: String
    /// The tool's HTTP status, when it answered.
    public var httpStatus: Int?
    /// From the start of the HTTP request to its end; nil until it ends, or when none was made.
    public var durationMilliseconds: Int?
    /// Set for a tool configured with `approval = "always"`.
    public var approval: ToolApprovalState?
    /// The answer was longer than the tool's `max_response_bytes`: `content` holds its start.
    public var truncated: Bool
    /// Whose request (a send, a regenerate, an edit, a continue) started the reply that asked
    /// for this call, when that was not the owner: the call runs with the owner's secrets only
    /// once the owner has said yes, knowing who asked.
    public var requestedBy: Author?
    /// Who answered the approval (`approved` or `denied`); nil while it waits, or when
    /// nobody answered in time and the call was denied for it.
    public var decidedBy: Author?

    public init(callID: String, name: String, httpStatus: Int? = nil, durationMilliseconds: Int? = nil,
                approval: ToolApprovalState? = nil, truncated: Bool = false, requestedBy: Author? = nil,
                decidedBy: Author? = nil) {
        self.callID = callID
        self.name = name
        self.httpStatus = httpStatus
        self.durationMilliseconds = durationMilliseconds
        self.approval = approval
        self.truncated = truncated
        self.requestedBy = requestedBy
        self.decidedBy = decidedBy
    }
}

public struct Message: Equatable, Sendable {
    public var id: String
    public var conversation: String
    public var role: Role
    public var content: String
    public var status: MessageStatus
    public var created: Timestamp
    public var author: Author?
    public var model: String?
    public var finishReason: String?
    public var usage: Usage?
    public var error: MessageError?
    /// A newer message took this one's place (a regenerated reply, an edited message and
    /// the replies to it): it stays in the history and is left out of the model's context.
    public var supersededBy: String?
    /// The sampling parameters a reply was made with; nil when none was set.
    public var params: SamplingParameters?
    /// Answers a client offers to send with one keystroke (a profile's, under its last welcome message).
    public var quickReplies: [String]?
    /// What the reply's request held, when a context budget applied.
    public var context: ContextInfo?
    /// The tools an assistant message asked for (it then ended with them; their results follow it).
    public var toolCalls: [ToolCall]?
    /// On a `tool` message: the call it answers and how the call went.
    public var tool: ToolResult?
    /// On a user message: the files it carries, in the order they were attached.
    public var attachments: [Attachment]?
    /// Attachment references this version cannot read (a type it does not know) that still
    /// name a blob: kept as written, after `attachments` when written again, so that a copy
    /// of the message (an edit, a fork) loses nothing and their blobs stay referenced.
    public var otherAttachments: [JSON]?
    /// On an assistant message: what the model thought before (and between) its answers.
    public var reasoning: Reasoning?
    /// The daemon's own: where the reasoning came from and what the server wants back of it.
    /// Never in `json` (clients are not sent it); the log keeps it beside the message.
    public var reasoningSource: ReasoningSource?

    /// Every blob the message names: its attachments' and those of `otherAttachments`.
    public var attachmentDigests: [String] {
        (attachments ?? []).map(\.sha256) + (otherAttachments ?? []).compactMap { $0["sha256"]?.string }
    }

    public init(id: String, conversation: String, role: Role, content: String, status: MessageStatus,
                created: Timestamp, author: Author? = nil, model: String? = nil, finishReason: String? = nil,
                usage: Usage? = nil, error: MessageError? = nil, supersededBy: String? = nil,
                params: SamplingParameters? = nil, quickReplies: [String]? = nil, context: ContextInfo? = nil,
                toolCalls: [ToolCall]? = nil, tool: ToolResult? = nil, attachments: [Attachment]? = nil) {
        self.attachments = attachments
        self.toolCalls = toolCalls
        self.tool = tool
        self.context = context
        self.params = params
        self.quickReplies = quickReplies
        self.id = id
        self.conversation = conversation
        self.role = role
        self.content = content
        self.status = status
        self.created = created
        self.author = author
        self.model = model
        self.finishReason = finishReason
        self.usage = usage
        self.error = error
        self.supersededBy = supersededBy
    }

    public var sequence: Int { MessageID.sequence(of: id) ?? 0 }
    public var order: MessageOrder { MessageID.order(of: id) ?? MessageOrder(sequence: 0) }

    public var json: JSON {
        var object: [String: JSON] = [
            "id": .string(id), "conversation": .string(conversation), "role": .string(role.rawValue),
            "content": .string(content), "status": .string(status.rawValue), "created": .string(created.description),
        ]
        if let author { object["author"] = author.json }
        if let model { object["model"] = .string(model) }
        if let finishReason { object["finish_reason"] = .string(finishReason) }
        if let usage { object["usage"] = usage.json }
        if let error { object["error"] = error.json }
        if let supersededBy { object["superseded_by"] = .string(supersededBy) }
        if let params, !params.isEmpty { object["params"] = params.json }
        if let quickReplies { object["quick_replies"] = .array(quickReplies.map(JSON.string)) }
        if let context { object["context"] = context.json }
        if let reasoning { object["reasoning"] = reasoning.json }
        if let toolCalls, !toolCalls.isEmpty { object["tool_calls"] = .array(toolCalls.map(\.json)) }
        let allAttachments = (attachments ?? []).map(\.json) + (otherAttachments ?? [])
        if !allAttachments.isEmpty { object["attachments"] = .array(allAttachments) }
        if let tool {
            object["tool_call_id"] = .string(tool.callID)
            object["name"] = .string(tool.name)
            if let status = tool.httpStatus { object["http_status"] = .int(status) }
            if let duration = tool.durationMilliseconds { object["duration_ms"] = .int(duration) }
            if let approval = tool.approval { object["approval"] = .string(approval.rawValue) }
            if tool.truncated { object["truncated"] = .bool(true) }
            if let requester = tool.requestedBy { object["requested_by"] = requester.json }
            if let decider = tool.decidedBy { object["decided_by"] = decider.json }
        }
        return .object(object)
    }

    public init?(json: JSON) { self.init(fields: json) }

    /// Read from a message object's members, however they were read: a tree (`JSON`), or
    /// scanned straight from a log record's bytes (`MessageMembers`). One reading, so the
    /// two cannot differ.
    init?(fields json: some MessageFieldSource) {
        guard let id = json[.id]?.string, MessageID.order(of: id) != nil,
              let conversation = json[.conversation]?.string,
              let role = json[.role]?.string.flatMap(Role.init(rawValue:)), let content = json[.content]?.string,
              let status = json[.status]?.string.flatMap(MessageStatus.init(rawValue:)),
              let created = json[.created]?.string.flatMap(Timestamp.init(rfc3339:))
        else { return nil }
        self.init(id: id, conversation: conversation, role: role, content: content, status: status, created: created,
                  author: json[.author].flatMap(Author.init(json:)), model: json[.model]?.string,
                  finishReason: json[.finishReason]?.string, usage: json[.usage].flatMap(Usage.init(json:)),
                  error: json[.error].flatMap(MessageError.init(json:)),
                  supersededBy: json[.supersededBy]?.string.flatMap { MessageID.sequence(of: $0) == nil ? nil : $0 },
                  params: json[.params].flatMap { try? SamplingParameters(json: $0) },
                  quickReplies: json[.quickReplies]?.array.map { $0.compactMap(\.string) },
                  context: json[.context].flatMap(ContextInfo.init(json:)),
                  toolCalls: json[.toolCalls]?.array.map { $0.compactMap(ToolCall.init(json:)) },
                  tool: role == .tool ? ToolResult(fields: json) : nil,
                  attachments: json[.attachments]?.array.map { $0.compactMap(Attachment.init(json:)) })
        let others = json[.attachments]?.array?.filter { item in
            Attachment(json: item) == nil && item["sha256"]?.string.map(Attachment.isDigest) == true
        } ?? []
        if !others.isEmpty { otherAttachments = others }
        reasoning = json[.reasoning].flatMap(Reasoning.init(json:))
    }
}

extension ToolResult {
    /// The tool fields of a `tool` message's members; a message without `tool_call_id` has none.
    init?(fields json: some MessageFieldSource) {
        guard let callID = json[.toolCallID]?.string else { return nil }
        self.init(callID: callID, name: json[.name]?.string ?? "", httpStatus: json[.httpStatus]?.int,
                  durationMilliseconds: json[.durationMilliseconds]?.int,
                  approval: json[.approval]?.string.flatMap(ToolApprovalState.init(rawValue:)),
                  truncated: json[.truncated]?.bool == true, requestedBy: json[.requestedBy].flatMap(Author.init(json:)),
                  decidedBy: json[.decidedBy].flatMap(Author.init(json:)))
    }
}

/// Where a forked conversation came from: the conversation and the last message copied.
public struct ForkOrigin: Equatable, Sendable {
    public var conversation: String
    public var message: String

    public init(conversation: String, message: String) {
        self.conversation = conversation
        self.message = message
    }

    public var json: JSON { ["conversation": .string(conversation), "message": .string(message)] }

    public init?(json: JSON) {
        guard let conversation = json["conversation"]?.string, let message = json["message"]?.string else { return nil }
        self.init(conversation: conversation, message: message)
    }
}

public struct ConversationInfo: Equatable, Sendable {
    public var id: String
    public var title: String
    public var created: Timestamp
    public var updated: Timestamp
    public var model: String
    public var system: String?
    public var messageCount: Int
    public var forkedFrom: ForkOrigin?
    /// The configured provider its replies come from.
    public var provider: String
    /// Tokens over all its replies (`estimated` when any reply's count was).
    public var usage: Usage
    /// The profile it was created from, if any.
    public var profile: String?
    /// The sampling parameters its replies are asked for with.
    public var params: SamplingParameters
    /// Other users who may see it (`conversation.share`), in uid order.
    public var sharedWith: [ConversationShare] = []
    /// It was never given a model: `model` is the configured default, and follows it when the
    /// config changes (`model_default`, written only when true).
    public var modelIsDefault = false

    public static let defaultProvider = "default"

    public init(id: String, title: String, created: Timestamp, updated: Timestamp, model: String, system: String?, messageCount: Int,
                forkedFrom: ForkOrigin? = nil, provider: String = Self.defaultProvider,
                usage: Usage = Usage(promptTokens: 0, completionTokens: 0, totalTokens: 0),
                profile: String? = nil, params: SamplingParameters = SamplingParameters(), sharedWith: [ConversationShare] = []) {
        self.sharedWith = sharedWith
        self.profile = profile
        self.params = params
        self.provider = provider
        self.usage = usage
        self.id = id
        self.title = title
        self.created = created
        self.updated = updated
        self.model = model
        self.system = system
        self.messageCount = messageCount
        self.forkedFrom = forkedFrom
    }

    public var json: JSON {
        var object: [String: JSON] = [
            "id": .string(id), "title": .string(title), "created": .string(created.description),
            "updated": .string(updated.description), "model": .string(model), "message_count": .int(messageCount),
            "provider": .string(provider), "usage": usage.json, "params": params.json,
        ]
        if let profile { object["profile"] = .string(profile) }
        if let system { object["system"] = .string(system) }
        if let forkedFrom { object["forked_from"] = forkedFrom.json }
        object["shared_with"] = .array(sharedWith.map(\.json))
        if modelIsDefault { object["model_default"] = .bool(true) }
        return .object(object)
    }

    public init?(json: JSON) {
        guard let id = json["id"]?.string, let title = json["title"]?.string,
              let created = json["created"]?.string.flatMap(Timestamp.init(rfc3339:)),
              let updated = json["updated"]?.string.flatMap(Timestamp.init(rfc3339:)),
              let model = json["model"]?.string
        else { return nil }
        self.init(id: id, title: title, created: created, updated: updated, model: model,
                  system: json["system"]?.string, messageCount: json["message_count"]?.int ?? 0,
                  forkedFrom: json["forked_from"].flatMap(ForkOrigin.init(json:)),
                  provider: json["provider"]?.string ?? Self.defaultProvider,
                  usage: json["usage"].flatMap(Usage.init(json:)) ?? Usage(promptTokens: 0, completionTokens: 0, totalTokens: 0),
                  profile: json["profile"]?.string,
                  params: json["params"].flatMap { try? SamplingParameters(json: $0) } ?? SamplingParameters())
        sharedWith = json["shared_with"]?.array?.compactMap(ConversationShare.init(json:)) ?? []
        modelIsDefault = json["model_default"]?.bool == true
    }
}

/// A client as other clients see it.
public struct ClientInfo: Equatable, Sendable {
    public var id: String
    public var uid: UInt32
    public var login: String
    public var name: String
    public var client: String
    /// The share link the connection declared at `hello` (its `login` is then `link:ID`).
    public var link: String?

    public init(id: String, uid: UInt32, login: String, name: String, client: String, link: String? = nil) {
        self.id = id
        self.uid = uid
        self.login = login
        self.name = name
        self.client = client
        self.link = link
    }

    public var json: JSON {
        var object: [String: JSON] = ["id": .string(id), "uid": .int(Int(uid)), "login": .string(login), "name": .string(name),
                                      "client": .string(client)]
        if let link { object["link"] = .string(link) }
        return .object(object)
    }

    public init?(json: JSON) {
        guard let id = json["id"]?.string, let uid = json["uid"]?.int, let login = json["login"]?.string,
              let name = json["name"]?.string else { return nil }
        self.init(id: id, uid: UInt32(clamping: uid), login: login, name: name, client: json["client"]?.string ?? "",
                  link: json["link"]?.string)
    }
}

public enum ProtocolVersion {
    public static let current = 1
    public static let confabVersion = "0.1.0"
}
