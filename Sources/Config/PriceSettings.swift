import DaemonSettings

extension Settings {
    /// A `[providers.NAME.prices.MODEL]` table, checked: `input` and `output` are needed (a
    /// price without one of them would quietly count it free), every price is a number of zero
    /// or more, and errors name the key and its line.
    static func modelPrice(_ section: ConfigFile.PriceSection) throws(ConfigError) -> ModelPrice {
        let table = section.table
        let given = [("input", section.input), ("cached_input", section.cached_input), ("cache_write", section.cache_write),
                     ("output", section.output)]
        for (key, value) in given {
            if let value, value < 0 { throw table.error(key, "must be a price of zero or more per million tokens, not \(value)") }
        }
        for (key, value) in [("input", section.input), ("output", section.output)] where value == nil {
            let line = (table.position ?? table.table.members.first?.position).map { "\($0): " } ?? ""
            throw ConfigError(description: "\(table.file): \(line)\(table.path) needs \(key): the price of a million \(key) tokens")
        }
        guard !section.model.isEmpty else {
            let line = table.position.map { "\($0): " } ?? ""
            throw ConfigError(description: "\(table.file): \(line)\(table.path) must name a model")
        }
        return ModelPrice(input: section.input ?? 0, cachedInput: section.cached_input, cacheWrite: section.cache_write,
                          output: section.output ?? 0)
    }
}
