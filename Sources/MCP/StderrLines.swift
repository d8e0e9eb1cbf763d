/// A server's stderr as the daemon's log takes it: split into lines, each cut to
/// `maxLineCharacters` with control characters escaped (a server cannot forge log lines or
/// move a terminal's cursor), at most `linesPerWindow` lines a window of `windowMilliseconds`;
/// past that, lines are counted and one line says how many were dropped.
public struct StderrLines: Sendable {
    public let maxLineCharacters: Int
    public let linesPerWindow: Int
    public let windowMilliseconds: UInt64
    private var partial: [UInt8] = []
    private var windowStart: UInt64?
    private var linesInWindow = 0
    private var dropped = 0

    public init(maxLineCharacters: Int = 500, linesPerWindow: Int = 20, windowMilliseconds: UInt64 = 10_000) {
        self.maxLineCharacters = maxLineCharacters
        self.linesPerWindow = linesPerWindow
        self.windowMilliseconds = windowMilliseconds
    }

    /// Bytes read at `now` (milliseconds); returns the log lines to write.
    public mutating func feed(_ bytes: some Collection<UInt8>, now: UInt64) -> [String] {
        var lines: [String] = []
        for byte in bytes {
            if byte == 0x0A {
                emit(partial, now: now, into: &lines)
                partial = []
            } else if partial.count < maxLineCharacters * 4 {
                partial.append(byte)
            }
        }
        return lines
    }

    /// The stream ended: what is left of a last unterminated line, and the dropped count.
    public mutating func finish(now: UInt64) -> [String] {
        var lines: [String] = []
        if !partial.isEmpty { emit(partial, now: now, into: &lines) }
        partial = []
        if dropped > 0 { lines.append("(\(dropped) more lines dropped)") }
        dropped = 0
        return lines
    }

    private mutating func emit(_ line: [UInt8], now: UInt64, into lines: inout [String]) {
        if let start = windowStart, now < start + windowMilliseconds {
            if linesInWindow >= linesPerWindow {
                dropped += 1
                return
            }
        } else {
            if dropped > 0 { lines.append("(\(dropped) more lines dropped)") }
            dropped = 0
            windowStart = now
            linesInWindow = 0
        }
        linesInWindow += 1
        lines.append(Self.escaped(line, limit: maxLineCharacters))
    }

    /// Control characters as `\u{…}`-style escapes, a backslash doubled, cut to `limit` characters.
    static func escaped(_ line: [UInt8], limit: Int) -> String {
        var text = ""
        var count = 0
        for scalar in String(decoding: line, as: UTF8.self).unicodeScalars {
            if count >= limit {
                text += "…"
                break
            }
            switch scalar.value {
            case 0x5C: text += "\\\\"
            case 0x09: text += "\\t"
            case 0x0D: text += "\\r"
            case 0..<0x20, 0x7F, 0x80..<0xA0, 0x2028, 0x2029:
                text += "\\u{\(String(scalar.value, radix: 16))}"
            default: text.unicodeScalars.append(scalar)
            }
            count += 1
        }
        return text
    }
}
