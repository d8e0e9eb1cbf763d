import ConfabProtocol
import DaemonSettings
import ServiceSettings
import Upstream

/// How one attempt at a reply's turn ended: the stream's `finished` event, and what the attempt
/// had streamed by then.
struct AttemptOutcome: Equatable {
    /// The server's refusal or the transport's failure, secrets already redacted.
    var error: MessageError?
    var retryAfterSeconds: Int?
    var finishReason: String?
    var usage: Usage?
    var toolCalls: [ToolCall] = []
    /// Bytes of text this attempt streamed (a continuation's earlier text is not counted):
    /// only an attempt that streamed nothing can be tried again without repeating text.
    var streamedBytes = 0
    /// The answer carried reasoning (text or the API's items).
    var reasoned = false
}

/// What changes in the request before it is sent again.
enum AttemptAdjustment: Equatable {
    /// The textless tool-call turns go in the other form (`refused.other`).
    case toolCallTurnContent(refused: ToolCallTurnContent)
    /// Each image goes as a line naming it.
    case imagesAsLines
}

/// What the runner learns of a provider (and model) from a turn it took.
enum ProviderLesson: Equatable {
    /// The provider takes textless tool-call turns in this form: sent so from now on.
    case toolCallTurnContent(ToolCallTurnContent)
    /// The model took the request once its images went as lines: these are blamed.
    case refusedImages([String])
    /// The model took the request with the images it carried.
    case tookImages
}

/// How a turn ends, when it is not tried again.
struct AttemptEnding: Equatable {
    var finishReason: String?
    /// Nil: the turn is complete.
    var error: MessageError?
    /// The calls the turn asked for, nil when none.
    var toolCalls: [ToolCall]?
    var lessons: [ProviderLesson] = []
    /// The conversation's corrected estimate ratio, when the server reported real usage.
    var contextRatio: Double?
    /// What the server reported; nil: the runner estimates it from what streamed.
    var usage: Usage?

    var status: MessageStatus { error == nil ? .complete : .failed }
}

enum AttemptDecision: Equatable {
    /// Ask again after the usual wait; clients are told of `announced`.
    case retry(announced: MessageError, retryAfterSeconds: Int?, adjustment: AttemptAdjustment?)
    case finish(AttemptEnding)
}

/// The rules a reply's attempt is judged by, as a value: from an attempt's outcome to whether it
/// is tried again (as it was, or adjusted: the other tool-call turn form, images as lines) or
/// ends (with what error, which lessons about the provider, which usage). The order matters and
/// is this: another form of a tool-call turn, then images as lines, then the usual retries,
/// else the ending. Nothing here does I/O: `ReplyRunner` builds one when an attempt ends and
/// carries out its decision.
struct AttemptPolicy: Equatable {
    // The limits in force.
    var maxRetries: Int
    var maxToolRounds: Int
    var isStopping = false

    // The reply's state.
    /// Attempts made at this turn, the one that just ended included.
    var attempts: Int
    var toolRounds = 0
    var refusedToolCallTurnContent: ToolCallTurnContent?
    var withdrawnImages: [String]?

    // The request the attempt sent.
    var api: ProviderAPI = .chat
    var sentToolCallTurnContent: ToolCallTurnContent = .empty
    var hasTextlessToolCallTurn = false
    var carriesImages = false
    var maxTokens: Int?
    /// The prompt as the context budget counts it (`ContextBudget.rawEstimate`).
    var promptEstimate = 0

    // Where an error's explanation points.
    var provider = Provider.defaultName
    var profile: String?
    var contextTokens: Int?

    /// The form this provider's tool-call turns are sent in since it took one, if it did.
    var learnedToolCallTurnContent: ToolCallTurnContent?

    func decide(_ outcome: AttemptOutcome) -> AttemptDecision {
        if let error = outcome.error {
            if mayTryOtherToolCallTurnContent(after: error, outcome) {
                return .retry(announced: error, retryAfterSeconds: outcome.retryAfterSeconds,
                              adjustment: .toolCallTurnContent(refused: sentToolCallTurnContent))
            }
            if mayTryWithoutImages(after: error, outcome) {
                var announced = error
                announced.message = ImageRefusals.refusedReason + ": " + error.message
                return .retry(announced: announced, retryAfterSeconds: nil, adjustment: .imagesAsLines)
            }
            if shouldRetry(error, outcome) {
                return .retry(announced: error, retryAfterSeconds: outcome.retryAfterSeconds, adjustment: nil)
            }
        }
        var ending = AttemptEnding(finishReason: outcome.finishReason, error: outcome.error.map(explained))
        if ending.error == nil {
            if let refused = refusedToolCallTurnContent, learnedToolCallTurnContent != refused.other {
                ending.lessons.append(.toolCallTurnContent(refused.other))
            }
            ending.lessons.append(withdrawnImages.map(ProviderLesson.refusedImages) ?? .tookImages)
            ending.error = thinkingExhausted(outcome)
        }
        if !outcome.toolCalls.isEmpty {
            ending.toolCalls = outcome.toolCalls
            if toolRounds >= maxToolRounds {
                ending.error = MessageError(code: .toolRounds, message: "the model asked for tools again after \(toolRounds) rounds"
                    + " of tool calls; limits.max_tool_rounds is \(maxToolRounds)")
            }
        }
        if let usage = outcome.usage, !usage.isEstimated {
            ending.contextRatio = ContextBudget.calibrated(reported: usage.promptTokens, estimated: promptEstimate)
        }
        ending.usage = outcome.usage
        return .finish(ending)
    }

    /// Whether a refusal could be the server's of the one shape servers disagree on: an answer
    /// of 4xx or 5xx (not a missing model, a timeout, a body too large, nor a gateway's or an
    /// overloaded server's passing refusal, which the usual retries are for) to a chat request
    /// holding an assistant turn that asked for tools and said nothing, before any text came.
    /// The other form is then tried, once a turn, so that no server's schema can leave a
    /// conversation unusable for good.
    private func mayTryOtherToolCallTurnContent(after error: MessageError, _ outcome: AttemptOutcome) -> Bool {
        guard api == .chat, refusedToolCallTurnContent == nil, hasTextlessToolCallTurn, !isStopping,
              error.code == .upstreamHTTP, let status = error.status, (400..<600).contains(status), ![404, 408, 413, 502, 503, 504, 529].contains(status),
              // A server that names the reasoning as what it refused is taken at its word: another
              // form of `content` would be refused the same.
              !Self.isReasoningRefusal(error)
        else { return false }
        return outcome.streamedBytes == 0
    }

    /// Whether to send the request once more with each image as a line naming it: it carried
    /// images, the server refused it as a request it will not take (`ImageRefusals.isImageRefusal`),
    /// before any text came, and this turn has not been sent so yet. Whatever `max_retries` says:
    /// else one image would break the conversation for good.
    /// A 2xx with no answer at all (`MessageError.noAnswer`) to a request holding images is taken
    /// as a refusal of them too: llama-cpp-python answers so when an image went to a text-only
    /// model (its data URL became prompt text past the window).
    private func mayTryWithoutImages(after error: MessageError, _ outcome: AttemptOutcome) -> Bool {
        guard withdrawnImages == nil, !isStopping, ImageRefusals.isImageRefusal(error) || error == .noAnswer, carriesImages
        else { return false }
        return outcome.streamedBytes == 0
    }

    /// Only a refusal that streamed nothing is retried: then a second try cannot repeat text.
    private func shouldRetry(_ error: MessageError, _ outcome: AttemptOutcome) -> Bool {
        guard outcome.streamedBytes == 0, attempts <= maxRetries, !isStopping else { return false }
        switch error.code {
        case .rateLimited, .upstreamConnection, .upstreamTimeout: return true
        case .upstreamHTTP: return (error.status ?? 0) >= 500
        default: return false
        }
    }

    /// Whether a server's refusal names the reasoning sent back (or not sent back) as its reason:
    /// DeepSeek's "The reasoning_content in the thinking mode must be passed back to the API.",
    /// Anthropic's "Expected 'thinking' or 'redacted_thinking', but found 'tool_use'", or a
    /// server that takes no `reasoning_content` at all.
    static func isReasoningRefusal(_ error: MessageError) -> Bool {
        guard error.code == .upstreamHTTP else { return false }
        let text = error.message.lowercased()
        return text.contains("reasoning_content") || text.contains("redacted_thinking") || text.contains("thinking` block")
            || text.contains("thinking block") || text.contains("'thinking'") || text.contains("`thinking`")
    }

    /// The model spent the whole token limit thinking: a reply cut for length (`length`,
    /// Anthropic's `max_tokens`) with reasoning, no text of its own and no tool call. There is
    /// nothing to continue; the message says how many tokens went and what to change.
    private func thinkingExhausted(_ outcome: AttemptOutcome) -> MessageError? {
        guard outcome.finishReason == "length", outcome.toolCalls.isEmpty, outcome.streamedBytes == 0, outcome.reasoned else { return nil }
        return MessageError(code: .thinkingExhausted, message: Self.thinkingExhaustedMessage(
            maxTokens: maxTokens ?? outcome.usage?.completionTokens, profile: profile))
    }

    /// "the model used all N tokens of max_tokens thinking and wrote no answer: raise max_tokens
    /// (profile `NAME`) or lower reasoning_effort"; without a count (none sent, none reported),
    /// the server's own limit is named; without a profile, none is.
    static func thinkingExhaustedMessage(maxTokens: Int?, profile: String?) -> String {
        let spent = maxTokens.map { "all \($0) tokens of max_tokens" } ?? "all of the server's token limit"
        let whereToRaise = profile.map { " (profile `\($0)`)" } ?? ""
        return "the model used \(spent) thinking and wrote no answer: raise max_tokens\(whereToRaise) or lower reasoning_effort"
    }

    /// A failure as the reply is to carry it: what the server refused, or what an empty answer
    /// usually means and where to change it.
    func explained(_ error: MessageError) -> MessageError {
        if Self.isReasoningRefusal(error) {
            // The server's own words first: they say what it wants. Then where the rule is set.
            var explained = error
            let setting = api == .chat ? "; provider \"\(provider)\" sends it as its reasoning_pass_back says" : ""
            explained.message = error.message + " (the server refused the reasoning sent back with the conversation's tool-call turns\(setting))"
            return explained
        }
        if error == .noAnswer {
            let setting = profile.map { "in profile \"\($0)\" or provider \"\(provider)\"" } ?? "in provider \"\(provider)\""
            let current = contextTokens.map { " (it is \($0) now)" } ?? ""
            return MessageError(code: error.code, message: error.message + ". Some servers (llama.cpp's) answer so when the context is"
                + " longer than the model's window; this request's was about \(promptEstimate) tokens."
                + " Set context_tokens \(setting) to the model's window\(current), so that older turns are left out.")
        }
        var explained = error
        if withdrawnImages != nil, error.code == .upstreamHTTP {
            explained.message = "the server refused the request with its images, and again with each image as a line naming it: " + explained.message
        }
        if let refused = refusedToolCallTurnContent, error.code == .upstreamHTTP {
            explained.message = "the server refused a context holding a tool-call turn without text, sent \(refused)"
                + " and again \(refused.other): " + explained.message
        }
        return explained
    }
}

/// What the runner has learnt of the providers' servers, until the config is loaded again: the
/// form of a textless tool-call turn each took after refusing the usual one, and the images each
/// model refused and took.
struct ProviderQuirks {
    /// By provider name: sent first from then on.
    private(set) var toolCallTurnForms: [String: ToolCallTurnContent] = [:]
    private(set) var imageRefusals = ImageRefusals()

    /// The form a provider's textless tool-call turns are sent in.
    func toolCallTurnContent(for provider: String) -> ToolCallTurnContent {
        toolCallTurnForms[provider] ?? .empty
    }

    /// Takes a lesson from a turn of `conversation` that `provider`'s `model` took; `sentImages`
    /// are the digests of the images that turn's request carried. Returns what to log of it.
    @discardableResult
    mutating func learn(_ lesson: ProviderLesson, conversation: String, provider: String, model: String,
                        sentImages: @autoclosure () -> [String]) -> String? {
        switch lesson {
        case .toolCallTurnContent(let form):
            toolCallTurnForms[provider] = form
            return "provider=\(provider) took the tool-call turn \(form): its requests carry it so from now on"
        case .refusedImages(let withdrawn):
            let blamed = imageRefusals.refusedImages(withdrawn, in: conversation, provider: provider, model: model)
            return "provider=\(provider) model=\(model) took the request without its images:"
                + " \(blamed.count) of them go as a line naming them from now on"
        case .tookImages:
            imageRefusals.took(sentImages(), in: conversation, provider: provider, model: model)
            return nil
        }
    }

    /// A conversation is deleted: what its images taught goes.
    mutating func forget(conversation: String) { imageRefusals.forget(conversation: conversation) }

    /// The config was loaded again: the providers may be others.
    mutating func forgetAll() {
        toolCallTurnForms = [:]
        imageRefusals.forgetAll()
    }
}
