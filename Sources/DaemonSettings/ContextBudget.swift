import ConfabProtocol

/// What a reply's request is fitted into (`context_tokens`, the reply's `max_tokens`, the
/// tokenizer's ratio): the values, which Config checks against; the fitting is the broker's
/// (`ContextFit.swift` there): the system prompt, then as many of the latest turns as fit
/// beside room for the reply's `max_tokens`.
///
/// Tokens are estimated as `Usage.estimate` counts a prompt (about 4 bytes of UTF-8 per token,
/// 4 per message, 3 for the reply's priming), times `ratio`, rounded up: the ratio corrects the
/// estimate for the model's real tokenizer (see `calibrated`).
public struct ContextBudget: Sendable, Equatable {
    /// The reply's room when nobody sets `max_tokens`: the request sends none, but the model
    /// still needs somewhere to put its answer.
    public static let defaultMaxTokens = 1024
    /// Below this a system prompt and one short question barely fit.
    public static let minimumTokens = 256
    /// How far the upstream's reported prompt tokens may move the estimate: a tokenizer is
    /// not 4 times off, and a bogus report must not starve or flood the request.
    public static let ratioBounds: ClosedRange<Double> = 0.5...2.0

    public var contextTokens: Int
    public var maxTokens: Int
    public var ratio: Double

    public init(contextTokens: Int, maxTokens: Int?, ratio: Double = 1) {
        self.contextTokens = contextTokens
        self.maxTokens = maxTokens ?? Self.defaultMaxTokens
        self.ratio = min(max(ratio, Self.ratioBounds.lowerBound), Self.ratioBounds.upperBound)
    }

    /// The ratio to use after a request whose prompt was estimated at `estimated` (uncorrected)
    /// and reported by the upstream as `reported` tokens, bounded.
    public static func calibrated(reported: Int, estimated: Int) -> Double? {
        guard reported > 0, estimated > 0 else { return nil }
        return min(max(Double(reported) / Double(estimated), ratioBounds.lowerBound), ratioBounds.upperBound)
    }
}
