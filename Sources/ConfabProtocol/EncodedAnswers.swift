/// Answers kept as the bytes they came in, for a client that passes them on rather than reads
/// them: `confab export` writes a long conversation's messages as confabd encoded them, so
/// building each page's value tree only to write it again (a third of an export's time) is
/// left out. The bytes are checked as strictly as a parse would check them.

/// A successful answer's line, and where its `result` value is in it.
public struct EncodedAnswer: Equatable, Sendable {
    public let line: [UInt8]
    public let result: Range<Int>

    /// The id, and the result's place, of a line that is a successful answer; nil for anything
    /// else (an error answer, a notification, text that is not JSON), which is then read as
    /// every other line is.
    static func peek(_ line: ArraySlice<UInt8>) -> (id: Int, result: Range<Int>)? {
        var id: Int?
        var result: Range<Int>?
        var isError = false
        let base = line.startIndex
        do {
            try JSONScanner.read(line) { (scanner) throws(JSONParseError) in
                try scanner.members { (key, scanner) throws(JSONParseError) in
                    if key == "id" {
                        id = try scanner.readInt()
                    } else if key == "result" {
                        let start = scanner.offset
                        try scanner.skipValue()
                        result = (base + start)..<(base + scanner.offset)
                    } else if key == "error" || key == "method" {
                        isError = true
                    }
                }
            }
        } catch {
            return nil
        }
        guard let id, let result, !isError else { return nil }
        return (id, result)
    }
}

/// A `conversation.history` page as bytes: each message's encoded value, in order, and whether
/// older ones exist.
public struct EncodedHistoryPage: Sendable {
    public let answer: EncodedAnswer
    /// Each message's bytes in `answer.line`.
    public let messages: [Range<Int>]
    public let more: Bool
    /// The first message's id: where the page before this one ends.
    public let firstID: String?

    public enum Failure: Error, Equatable {
        case notAPage(String)
    }

    public init(_ answer: EncodedAnswer) throws(Failure) {
        self.answer = answer
        var ranges: [Range<Int>] = []
        var more: Bool?
        var firstID: String?
        let start = answer.result.lowerBound
        do {
            try answer.line.withUnsafeBufferPointer { line throws(JSONParseError) in
                let result = UnsafeBufferPointer(rebasing: line[answer.result])
                try JSONScanner.read(result) { (scanner) throws(JSONParseError) in
                    try scanner.members { (key, scanner) throws(JSONParseError) in
                        if key == "messages" {
                            try scanner.elements { (index, scanner) throws(JSONParseError) in
                                let from = scanner.offset
                                if index == 0, try scanner.kind() == .object {
                                    try scanner.members { (key, scanner) throws(JSONParseError) in
                                        if key == "id" { firstID = try scanner.readString() }
                                    }
                                } else {
                                    try scanner.skipValue()
                                }
                                ranges.append((start + from)..<(start + scanner.offset))
                            }
                        } else if key == "more" {
                            if try scanner.kind() == .bool {
                                more = try scanner.readValue().bool
                            }
                        }
                    }
                }
            }
        } catch {
            throw .notAPage("confabd's answer to conversation.history is not JSON: \(error)")
        }
        guard let more else { throw .notAPage("confabd's answer to conversation.history is not a page of messages") }
        self.messages = ranges
        self.more = more
        self.firstID = firstID
    }

    /// Message `index` of the page, terminal-safe (`JSON.writeTerminalSafe(encoded:)`).
    public func writeMessage(_ index: Int, into out: inout [UInt8]) {
        answer.line.withUnsafeBufferPointer { line in
            JSON.writeTerminalSafe(encoded: UnsafeBufferPointer(rebasing: line[messages[index]]), into: &out)
        }
    }

    /// Each message, terminal-safe (`JSON.writeTerminalSafe(encoded:)`), followed by `separator`.
    public func writeMessages(into out: inout [UInt8], separator: UInt8) {
        answer.line.withUnsafeBufferPointer { line in
            for range in messages {
                JSON.writeTerminalSafe(encoded: UnsafeBufferPointer(rebasing: line[range]), into: &out)
                out.append(separator)
            }
        }
    }
}
