import ArgumentParser
import ConfabProtocol
import Terminal

struct UsageCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "usage",
        abstract: "Sum the tokens replies used, and what they cost where the config gives prices.",
        discussion: """
            Every reply's tokens (in, cached, cache writes, out, thinking), summed by model, \
            conversation or day (UTC), with their cost at the prices of confabd's config \
            ([providers.NAME.prices.MODEL], per million tokens). Replies of models without a \
            price are counted and said so, never priced at zero. --since takes 30m, 12h, 7d or \
            2w: replies are counted by the hour they were asked in, so the hour that holds the \
            start counts whole.
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Option(help: ArgumentHelp("Only replies since this long ago: 30m, 12h, 7d, 2w.", valueName: "age")) var since: String?
    @Option(help: ArgumentHelp("Group by model, conversation or day.", valueName: "model|conversation|day")) var by = "model"
    @Flag(help: "Print the raw result object as JSON.") var json = false

    func validate() throws {
        if let since, Self.age(since) == nil { throw ValidationError("--since must be a number and m, h, d or w: 30m, 12h, 7d, 2w") }
        guard ["model", "conversation", "day"].contains(by) else { throw ValidationError("--by must be model, conversation or day") }
    }

    func run() throws {
        let connection = try Connection.start(socketPath, command: "usage")
        let start = since.flatMap(Self.age).map { Timestamp(milliseconds: Timestamp.now().milliseconds - $0) }
        let params = UsageParams(since: start, by: UsageGrouping(rawValue: by) ?? .model)
        let raw = try connection.call(.usageSummary, params.json)
        if json { return Out.json(raw) }
        let result = try Connection.read(UsageCall.self, raw)
        Out.stdout(Self.table(result, by: params.by))
    }

    /// `7d` as milliseconds; nil when it is not a count and a unit.
    static func age(_ text: String) -> Int64? {
        guard let unit = text.last, let count = Int64(text.dropLast()), count > 0, count < 100_000 else { return nil }
        let minute: Int64 = 60_000
        switch unit {
        case "m": return count * minute
        case "h": return count * 60 * minute
        case "d": return count * 24 * 60 * minute
        case "w": return count * 7 * 24 * 60 * minute
        default: return nil
        }
    }

    /// A cost as written in the config's currency: four decimals below 1, two above.
    static func cost(_ value: Double) -> String {
        let places = value < 1 ? 4 : 2
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let units = Int((value * scale).rounded())
        let whole = units / Int(scale), fraction = String(units % Int(scale))
        return "\(whole)." + String(repeating: "0", count: places - fraction.count) + fraction
    }

    /// The cost cell: `-` with no price at all, `+?` when some replies had none.
    static func costCell(_ row: UsageRow) -> String {
        guard let value = row.cost else { return "-" }
        return cost(value) + (row.unpricedReplies > 0 ? "+?" : "")
    }

    static func table(_ result: UsageResult, by: UsageGrouping) -> String {
        if result.rows.isEmpty { return "no replies\(by == .day ? "" : " yet")\n" }
        let first = by == .model ? "MODEL" : by == .day ? "DAY" : "CONVERSATION"
        let header = [first, "REPLIES", "IN", "CACHED", "CACHE WRITE", "OUT", "THINKING", "COST"]
        func cells(_ row: UsageRow, label: String) -> [String] {
            [label, UsageText.grouped(row.replies), (row.estimatedReplies > 0 ? "~" : "") + UsageText.grouped(row.promptTokens),
             UsageText.grouped(row.cacheReadTokens), UsageText.grouped(row.cacheWriteTokens),
             UsageText.grouped(row.completionTokens), UsageText.grouped(row.reasoningTokens), costCell(row)]
        }
        var rows = result.rows.map { row in
            let label = SafeText.singleLine(row.key) + (row.title.map { "  " + DisplayWidth.truncate(SafeText.singleLine($0), to: 40) } ?? "")
            return cells(row, label: label)
        }
        rows.append(cells(result.total, label: "total"))
        var widths = header.map { DisplayWidth.of($0) }
        for row in rows { for (column, cell) in row.enumerated() { widths[column] = max(widths[column], DisplayWidth.of(cell)) } }
        func line(_ cells: [String]) -> String {
            var text = DisplayWidth.pad(cells[0], to: widths[0])
            for column in 1..<cells.count {
                text += "  " + String(repeating: " ", count: widths[column] - DisplayWidth.of(cells[column])) + cells[column]
            }
            return text + "\n"
        }
        var text = line(header)
        for row in rows { text += line(row) }
        if result.total.unpricedReplies > 0 {
            let count = result.total.unpricedReplies
            text += "\(count) repl\(count == 1 ? "y" : "ies") of models without a price in the config are not in COST\n"
        }
        return text
    }
}
