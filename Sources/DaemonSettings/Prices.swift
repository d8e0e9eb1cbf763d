import ConfabProtocol

/// What one model of one provider costs, per million tokens (`[providers.NAME.prices.MODEL]`,
/// `[upstream.prices.MODEL]`), in whatever currency the config's author writes them in: confabd
/// only multiplies and adds.
public struct ModelPrice: Equatable, Sendable {
    /// Input tokens neither read from nor written to the server's prompt cache.
    public var input: Double
    /// Input tokens read from the prompt cache (`cached_input`); `input` when not given.
    public var cachedInput: Double
    /// Input tokens written to the prompt cache (`cache_write`); `input` when not given.
    public var cacheWrite: Double
    /// Output tokens, reasoning included (servers bill thinking as output).
    public var output: Double

    public init(input: Double, cachedInput: Double? = nil, cacheWrite: Double? = nil, output: Double) {
        self.input = input
        self.cachedInput = cachedInput ?? input
        self.cacheWrite = cacheWrite ?? input
        self.output = output
    }

    /// What `usage` cost at these prices.
    public func cost(of usage: Usage) -> Double {
        let input = Double(usage.uncachedPromptTokens) * input
        let read = Double(usage.cacheReadTokens ?? 0) * cachedInput
        let written = Double(usage.cacheWriteTokens ?? 0) * cacheWrite
        let output = Double(usage.completionTokens) * output
        return (input + read + written + output) / 1_000_000
    }
}

/// Every configured price, by provider and model.
public struct PriceTable: Equatable, Sendable {
    private var prices: [String: [String: ModelPrice]] = [:]

    public init() {}

    public var isEmpty: Bool { prices.isEmpty }

    public mutating func set(_ price: ModelPrice, provider: String, model: String) {
        prices[provider, default: [:]][model] = price
    }

    /// The price of `model` as served by `provider`, if the config gives one.
    public func price(provider: String, model: String) -> ModelPrice? {
        prices[provider]?[model]
    }
}
