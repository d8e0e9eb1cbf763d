import ConfabProtocol
import Terminal

/// Tool calls and tool messages read for `ToolCallFormat`, and the reply chains they make:
/// a reply `m2` that asks for tools is followed by its results (`m2.1`, …) and the model's
/// next turns (`m2.3`, …), all one reply.
enum ToolLines {
    /// The calls an assistant message asked for, in order; none for any other message.
    static func calls(of message: Message) -> [ToolCall] {
        message.role == .assistant ? message.toolCalls ?? [] : []
    }

    static func name(of message: Message) -> String { message.tool?.name ?? "?" }

    /// How a tool message's call went, or where it stands.
    static func outcome(of message: Message) -> ToolCallFormat.Outcome {
        ToolCallFormat.Outcome(status: message.status.rawValue, errorCode: message.error?.code.rawValue,
                               errorMessage: message.error?.message, httpStatus: message.tool?.httpStatus,
                               durationMilliseconds: message.tool?.durationMilliseconds, approval: message.tool?.approval?.rawValue)
    }

    /// `⚙ weather → 200 · 84 ms · {"temp":21,…}`
    static func result(_ message: Message, width: Int) -> String {
        ToolCallFormat.result(name: name(of: message), outcome: outcome(of: message), content: message.content,
                              httpStatus: message.tool?.httpStatus, width: width)
    }

    /// `m2` for `m2`, `m2.1` and `m2.3`: the reply a message belongs to; nil for what is no message id.
    static func head(_ id: String) -> String? {
        MessageID.order(of: id).map { MessageID.make($0.sequence) }
    }

    /// The sequence number of the reply a message belongs to.
    static func sequence(_ id: String?) -> Int? {
        id.flatMap { MessageID.order(of: $0)?.sequence }
    }

    /// A message a reply's tool calls added (`m2.1`, `m2.2`…), not the reply's first.
    static func isStep(_ id: String?) -> Bool {
        (id.flatMap { MessageID.order(of: $0)?.step } ?? 0) > 0
    }
}
