/// The sampling parameters a profile or a conversation sets; only those set are sent upstream.
/// One type for the config file, the protocol and the log, so all three check values alike.
public struct SamplingParameters: Sendable, Equatable {
    public var temperature: Double?
    public var topP: Double?
    public var maxTokens: Int?
    public var presencePenalty: Double?
    public var frequencyPenalty: Double?
    public var stop: [String]?
    public var seed: Int?
    /// How hard a reasoning model thinks (`low`, `medium`, `high`, …: each server names its
    /// own levels), sent as the provider's API spells it.
    public var reasoningEffort: String?

    /// Each parameter's name in the config file, the protocol and the log.
    public enum Key: String, CaseIterable, Sendable {
        case temperature, top_p, max_tokens, presence_penalty, frequency_penalty, stop, seed, reasoning_effort
    }

    /// OpenAI's limit; Anthropic takes more, but one profile should work with either.
    public static let maxStopSequences = 4

    public init(temperature: Double? = nil, topP: Double? = nil, maxTokens: Int? = nil, presencePenalty: Double? = nil,
                frequencyPenalty: Double? = nil, stop: [String]? = nil, seed: Int? = nil, reasoningEffort: String? = nil) {
        self.reasoningEffort = reasoningEffort
        self.temperature = temperature
        self.topP = topP
        self.maxTokens = maxTokens
        self.presencePenalty = presencePenalty
        self.frequencyPenalty = frequencyPenalty
        self.stop = stop
        self.seed = seed
    }

    /// The keys set, in `Key`'s order.
    public var keys: [Key] {
        Key.allCases.filter { key in
            switch key {
            case .temperature: temperature != nil
            case .top_p: topP != nil
            case .max_tokens: maxTokens != nil
            case .presence_penalty: presencePenalty != nil
            case .frequency_penalty: frequencyPenalty != nil
            case .stop: stop != nil
            case .seed: seed != nil
            case .reasoning_effort: reasoningEffort != nil
            }
        }
    }

    public var isEmpty: Bool { keys.isEmpty }

    /// These with every value `other` sets put in their place.
    public func overridden(by other: SamplingParameters) -> SamplingParameters {
        SamplingParameters(temperature: other.temperature ?? temperature, topP: other.topP ?? topP,
                           maxTokens: other.maxTokens ?? maxTokens, presencePenalty: other.presencePenalty ?? presencePenalty,
                           frequencyPenalty: other.frequencyPenalty ?? frequencyPenalty, stop: other.stop ?? stop,
                           seed: other.seed ?? seed, reasoningEffort: other.reasoningEffort ?? reasoningEffort)
    }

    /// The first value out of range, with what is wrong in words that follow the key's name.
    public func problem() -> (key: Key, problem: String)? {
        func range(_ value: Double?, _ bounds: ClosedRange<Double>, _ key: Key) -> (key: Key, problem: String)? {
            guard let value, !(value.isFinite && bounds.contains(value)) else { return nil }
            return (key, "must be a number from \(Self.format(bounds.lowerBound)) to \(Self.format(bounds.upperBound))")
        }
        if let found = range(temperature, 0...2, .temperature) { return found }
        if let found = range(topP, 0...1, .top_p) { return found }
        if let maxTokens, maxTokens < 1 { return (.max_tokens, "must be at least 1") }
        if let found = range(presencePenalty, -2...2, .presence_penalty) { return found }
        if let found = range(frequencyPenalty, -2...2, .frequency_penalty) { return found }
        if let stop {
            if stop.count > Self.maxStopSequences { return (.stop, "must hold at most \(Self.maxStopSequences) strings") }
            if stop.contains(where: \.isEmpty) { return (.stop, "must not hold an empty string") }
        }
        if let reasoningEffort, !Self.isEffortLevel(reasoningEffort) {
            return (.reasoning_effort, "must be a level such as \"low\", \"medium\" or \"high\": 1 to 32 lowercase letters")
        }
        return nil
    }

    /// A level's name as servers spell them (`minimal`, `xhigh`, `max`, `none`): checked only
    /// for its form, as each server has its own list.
    public static func isEffortLevel(_ text: String) -> Bool {
        (1...32).contains(text.utf8.count) && text.utf8.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    /// `{"temperature":0.2,"stop":["\n"],…}` with the keys set; `{}` when none is.
    public var json: JSON {
        var members: [String: JSON] = [:]
        if let temperature { members[Key.temperature.rawValue] = .double(temperature) }
        if let topP { members[Key.top_p.rawValue] = .double(topP) }
        if let maxTokens { members[Key.max_tokens.rawValue] = .int(maxTokens) }
        if let presencePenalty { members[Key.presence_penalty.rawValue] = .double(presencePenalty) }
        if let frequencyPenalty { members[Key.frequency_penalty.rawValue] = .double(frequencyPenalty) }
        if let stop { members[Key.stop.rawValue] = .array(stop.map(JSON.string)) }
        if let seed { members[Key.seed.rawValue] = .int(seed) }
        if let reasoningEffort { members[Key.reasoning_effort.rawValue] = .string(reasoningEffort) }
        return .object(members)
    }

    /// Reads what `json` writes, checking types and ranges; the error names the key at fault
    /// (`prefix` before it, e.g. "params.").
    public init(json: JSON, prefix: String = "") throws(SamplingParametersError) {
        guard let members = json.object else {
            let name = prefix.hasSuffix(".") ? String(prefix.dropLast()) : "sampling parameters"
            throw SamplingParametersError(message: "\(name) must be an object, not \(json.typeName)")
        }
        self.init()
        for (name, value) in members.sorted(by: { $0.key < $1.key }) {
            guard let key = Key(rawValue: name) else {
                throw SamplingParametersError(message: "\(prefix)\(name) is not a sampling parameter (there are: \(Key.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            func number() throws(SamplingParametersError) -> Double {
                guard let number = value.double else { throw SamplingParametersError(message: "\(prefix)\(name) must be a number, not \(value.typeName)") }
                return number
            }
            func integer() throws(SamplingParametersError) -> Int {
                guard let integer = value.int else { throw SamplingParametersError(message: "\(prefix)\(name) must be an integer, not \(value.typeName)") }
                return integer
            }
            switch key {
            case .temperature: temperature = try number()
            case .top_p: topP = try number()
            case .max_tokens: maxTokens = try integer()
            case .presence_penalty: presencePenalty = try number()
            case .frequency_penalty: frequencyPenalty = try number()
            case .seed: seed = try integer()
            case .reasoning_effort:
                guard let text = value.string else {
                    throw SamplingParametersError(message: "\(prefix)\(name) must be a string, not \(value.typeName)")
                }
                reasoningEffort = text
            case .stop:
                let strings = value.array?.compactMap(\.string)
                guard let strings, strings.count == value.array?.count else {
                    throw SamplingParametersError(message: "\(prefix)\(name) must be an array of strings")
                }
                stop = strings
            }
        }
        if let found = problem() { throw SamplingParametersError(message: "\(prefix)\(found.key.rawValue) \(found.problem)") }
    }
}

public struct SamplingParametersError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
