import ConfabProtocol

/// What a reply cost, as `ls -l` and `show` print it: the input and output counts, with the
/// parts the server reported apart (cache reads and writes of the input, reasoning of the
/// output): `in 2,125 (2,000 cached) · out 300 (200 thinking)`; `~` before a count confabd
/// estimated.
public enum UsageText {
    /// `12,345`.
    public static func grouped(_ number: Int) -> String {
        var digits = String(number)
        var grouped = ""
        while digits.count > 3 {
            grouped = "," + digits.suffix(3) + grouped
            digits.removeLast(3)
        }
        return digits + grouped
    }

    public static func line(_ usage: Usage) -> String {
        let mark = usage.isEstimated ? "~" : ""
        var input: [String] = []
        if let read = usage.cacheReadTokens, read > 0 { input.append("\(grouped(read)) cached") }
        if let written = usage.cacheWriteTokens, written > 0 { input.append("\(grouped(written)) written to cache") }
        var text = "in " + mark + grouped(usage.promptTokens) + (input.isEmpty ? "" : " (" + input.joined(separator: ", ") + ")")
        text += " · out " + mark + grouped(usage.completionTokens)
        if let reasoning = usage.reasoningTokens, reasoning > 0 { text += " (\(mark)\(grouped(reasoning)) thinking)" }
        return text
    }

    /// Whether `usage` has parts worth saying apart from its totals.
    public static func hasParts(_ usage: Usage?) -> Bool {
        guard let usage else { return false }
        return (usage.reasoningTokens ?? 0) > 0 || (usage.cacheReadTokens ?? 0) > 0 || (usage.cacheWriteTokens ?? 0) > 0
    }
}
