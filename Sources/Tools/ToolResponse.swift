/// What the model is given for a tool's HTTP answer.
public enum ToolResponse {
    /// The body as UTF-8 text (invalid sequences replaced with U+FFFD), cut to `cap` bytes on
    /// a character boundary when the server sent more; a cut body ends with
    /// `\n[cut: the response was N bytes; the first M are shown]`, N being `totalBytes` (what
    /// the server sent, more than `body.count` when the caller stopped reading). A status
    /// outside 200…299 is prefixed `HTTP <status>\n`. Every form of each of `secrets` is
    /// replaced, and in a cut body the start of one that the cut split (the body ends with it).
    public static func content(status: Int, body: [UInt8], totalBytes: Int, cap: Int,
                               secrets: SecretRedactor = .none) -> (content: String, truncated: Bool) {
        let prefix = (200...299).contains(status) ? "" : "HTTP \(status)\n"
        let total = max(totalBytes, body.count)
        let limit = max(cap, 0)
        guard total > limit else {
            return (prefix + secrets.redacting(String(decoding: body, as: UTF8.self)), false)
        }
        let end = boundary(in: body, before: min(limit, body.count))
        let shown = secrets.redacting(String(decoding: body[..<end], as: UTF8.self), cutAtEnd: true)
        return (prefix + shown + "\n[cut: the response was \(total) bytes; the first \(end) are shown]", true)
    }

    /// `end`, or the start of a character that would be split there: bytes after `end` were
    /// cut off, so a sequence it leaves incomplete goes too (at most three bytes).
    static func boundary(in bytes: [UInt8], before end: Int) -> Int {
        var start = end
        while start > 0, end - start < 4 {
            start -= 1
            let byte = bytes[start]
            guard byte & 0xC0 == 0x80 else {
                let length = switch byte {
                case 0xC0...0xDF: 2
                case 0xE0...0xEF: 3
                case 0xF0...0xF7: 4
                default: 1  // ASCII, or a byte that starts no sequence
                }
                return start + length > end ? start : end
            }
        }
        return end
    }
}
