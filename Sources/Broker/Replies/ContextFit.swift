import ConfabProtocol
import DaemonSettings
import Upstream

/// Fitting a reply's request into its `ContextBudget`.
extension ContextBudget {
    public struct Fitted: Equatable, Sendable {
        public var messages: [ChatMessage]
        public var info: ContextInfo
    }

    public enum Failure: Error, Equatable {
        /// The smallest request (system prompt, newest turn, a continuation's text) and the
        /// reply's room need `needed` tokens.
        case tooLarge(needed: Int, budget: Int)
    }

    /// What one image counts for, whatever its size: about what the APIs charge for a picture
    /// of a common size (Anthropic's rule, pixels / 750, gives 1,600 for the 1,092 x 1,092 it
    /// scales larger ones to; OpenAI's high detail charges a 1,024 x 1,024 one 765).
    public static let imageTokens = 1600

    /// Uncorrected tokens of a prompt made of these messages: as `Usage.estimate` counts a
    /// prompt's texts (text files as the text they are sent as, counted by their size until
    /// they are read), plus `imageTokens` for each image, plus the reasoning sent back with
    /// the turns that called tools (unless the provider sends none back).
    public static func rawEstimate(_ messages: [ChatMessage], sendsReasoning: Bool = true) -> Int {
        messages.reduce(3) { total, message in
            let reasoning = sendsReasoning ? message.reasoningBytesSent : 0
            return total + 4 + (message.estimatedText.utf8.count + message.unreadTextBytes + reasoning + 3) / 4
                + imageTokens * message.imageCount
        }
    }

    func estimate(_ messages: [ChatMessage], sendsReasoning: Bool) -> Int {
        Int((Double(Self.rawEstimate(messages, sendsReasoning: sendsReasoning)) * ratio).rounded(.up))
    }

    /// `context` as `Conversation.context(before:)` builds it; `continuing`, the text of a reply
    /// being continued, goes after it (with the instruction `ChatRequest.chatMessages` adds), so
    /// it must fit too. The oldest turns go first, a user turn with the assistant turns answering
    /// it, so what is left still starts with a user turn and alternates.
    /// `sendsReasoning`: whether the request sends reasoning back (a provider's
    /// `reasoning_pass_back = "none"` sends none).
    public func fit(_ context: [ChatMessage], continuing: String? = nil, sendsReasoning: Bool = true) -> Result<Fitted, Failure> {
        let system = context.first?.role == .system ? [context[0]] : []
        let turns = Array(context.dropFirst(system.count))
        // Units that go together: each starts at a user turn; assistant turns before the first
        // user turn (welcome messages) are a unit of their own.
        var starts: [Int] = []
        for (index, turn) in turns.enumerated() where index == 0 || turn.role == .user {
            if starts.last != index { starts.append(index) }
        }
        let extra = continuing.map { [ChatMessage(role: .assistant, content: $0), ChatMessage(role: .user, content: ChatRequest.continuationInstruction)] } ?? []
        let room = contextTokens - maxTokens
        // The last unit holds the newest user message and is never dropped.
        for (dropUnits, start) in starts.enumerated() {
            let kept = system + turns[start...] + extra
            let estimated = estimate(kept, sendsReasoning: sendsReasoning)
            if estimated <= room {
                let sent = system.count + turns.count - start
                return .success(Fitted(messages: Array(system + turns[start...]),
                                       info: ContextInfo(messages: sent, dropped: start, estimatedTokens: estimated)))
            }
            if dropUnits == starts.count - 1 {
                return .failure(.tooLarge(needed: estimated + maxTokens, budget: contextTokens))
            }
        }
        // No turns at all: only the system prompt.
        let estimated = estimate(system + extra, sendsReasoning: sendsReasoning)
        guard estimated <= room else { return .failure(.tooLarge(needed: estimated + maxTokens, budget: contextTokens)) }
        return .success(Fitted(messages: system, info: ContextInfo(messages: system.count, dropped: 0, estimatedTokens: estimated)))
    }
}

extension ChatMessage {
    /// What of a turn the model reads as text: its content with the text files read so far (as
    /// they are sent: name line and fenced block), and the name and arguments of each tool call it made.
    public var estimatedText: String {
        let text = attachments.isEmpty ? content : text(imagesAsLines: false, unreadAsLines: false)
        return toolCalls.isEmpty ? text : toolCalls.reduce(text) { $0 + $1.name + $1.arguments }
    }

    /// Bytes of reasoning the turn sends back: each API sends a tool-call turn's reasoning in
    /// the next request of its tool loop, as its text (chat's `reasoning_content`) or as the
    /// items the server gave (Anthropic's signed thinking blocks, Responses' encrypted items),
    /// whichever is larger; nothing for other turns.
    var reasoningBytesSent: Int {
        guard role == .assistant, !toolCalls.isEmpty, let reasoning else { return 0 }
        var items: [UInt8] = []
        for item in reasoning.items { item.write(into: &items) }
        return max(reasoning.text.utf8.count, items.count)
    }

    /// Images the turn sends, or will once read.
    var imageCount: Int {
        attachments.count(where: { attachment in
            switch attachment.content {
            case .image: true
            case .unread: attachment.type.isImage
            case .text, .line: false
            }
        })
    }
}
