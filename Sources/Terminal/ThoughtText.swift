import ConfabProtocol
/// A reply's reasoning as terminals show it: folded into one status row while the model
/// thinks (`thinking… 12 s · the newest line`), a one-line marker under a finished reply
/// (`[thought for 12 s]`), or the thought itself as a dim block when asked for. The thought
/// is the model's text: made safe (`SafeText`) before it is measured or printed.
public enum ThoughtText {
    /// The newest line of thought that holds anything but spaces, on one line.
    public static func newestLine(_ text: String) -> String {
        let lines = text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        let line = lines.last { $0.contains { !$0.isWhitespace } } ?? ""
        return SafeText.singleLine(String(line)).trimmingWhitespace
    }

    /// The folded row: `thinking… 12 s · newest line`, cut to `width` columns by display width.
    public static func status(seconds: Int, thought: String, width: Int) -> String {
        let newest = newestLine(thought)
        let head = "thinking… \(seconds) s"
        return TextRows.firstRow(newest.isEmpty ? head : head + " · " + newest, width: width)
    }

    /// `[thought for 12 s]`, and the encrypted blocks beside it when there were some.
    public static func marker(seconds: Int, redactedBlocks: Int = 0) -> String {
        "[thought for \(seconds) s" + (redactedBlocks > 0 ? ", \(redactedBlocks) encrypted block\(redactedBlocks == 1 ? "" : "s")" : "") + "]"
    }

    /// The thought laid out under a header: each of its lines wrapped between words at
    /// `width` (less the indent), every row indented by `indent` spaces, dim when `colour`.
    /// Ends without a line break.
    public static func block(_ thought: String, width: Int, indent: Int = 2, colour: Bool) -> String {
        let margin = String(repeating: " ", count: max(0, min(indent, width / 2)))
        let rows = SafeText.sanitized(thought).split(separator: "\n", omittingEmptySubsequences: false).flatMap { line in
            line.isEmpty ? [""] : TextRows.wrap(String(line).replacingTabs, width: max(1, width - margin.count))
        }
        var trimmed = rows[...]
        while trimmed.last?.isEmpty == true { trimmed.removeLast() }
        while trimmed.first?.isEmpty == true { trimmed.removeFirst() }
        let text = trimmed.map { $0.isEmpty ? "" : margin + $0 }.joined(separator: "\n")
        guard colour, !text.isEmpty else { return text }
        // Each row dim by itself: a terminal that scrolls or a pager that cuts keeps the style.
        return text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.isEmpty ? "" : "\u{1B}[2m" + $0 + "\u{1B}[0m" }.joined(separator: "\n")
    }
}

extension String {
    fileprivate var replacingTabs: String {
        replacing("\t", with: "    ")
    }
}
