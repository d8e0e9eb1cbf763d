import ConfabProtocol
import Tools

/// What one call a turn asked for becomes before anything is stored or sent: its `tool`
/// message (`m2.1`, …, status `streaming`), the tool it names (nil: none is offered by that
/// name), its checked arguments, or why it will not be made; the message says when it waits
/// for a person's yes. A value: `ReplyRunner.runTools` makes a `ToolRun` of each and carries
/// it out (records, approval, the call through its source).
struct PlannedToolCall {
    let call: ToolCall
    let message: Message
    let tool: OfferedTool?
    /// Nil when the call is refused.
    let arguments: JSON?
    let refusal: MessageError?

    var waitsForApproval: Bool { message.tool?.approval == .pending }

    /// The calls of a turn of reply number `chain`, numbered from `firstStep`. A call is refused
    /// when no offered tool has its name (the names offered are listed) or its arguments fail the
    /// tool's check; one that goes waits for a yes when its tool always wants one, or when the
    /// reply was asked for by someone other than the owner (whose secrets the call spends).
    static func plan(_ calls: [ToolCall], offered: [OfferedTool], requestedBy: Author?, ownUID: UInt32,
                     conversation: String, chain: Int, firstStep: Int, created: Timestamp) -> [PlannedToolCall] {
        let requester = requestedBy.flatMap { $0.isOwner(ownUID) ? nil : $0 }
        return calls.enumerated().map { index, call in
            let tool = offered.first { $0.name == call.name }
            var result = ToolResult(callID: call.id, name: call.name, requestedBy: requester)
            var refusal: MessageError?
            var arguments: JSON?
            if let tool {
                switch tool.validate(arguments: call.arguments) {
                case .success(let value): arguments = value
                case .failure(let problem): refusal = MessageError(code: .toolArguments, message: problem.message)
                }
                if refusal == nil, tool.approval == .always || requester != nil { result.approval = .pending }
            } else {
                let names = offered.map(\.name)
                refusal = MessageError(code: .toolUnavailable, message: "there is no tool \"\(call.name)\" here"
                    + (names.isEmpty ? "" : "; the tools are: " + names.joined(separator: ", ")))
            }
            let message = Message(id: MessageID.make(chain, step: firstStep + index), conversation: conversation, role: .tool, content: "",
                                  status: .streaming, created: created, tool: result)
            return PlannedToolCall(call: call, message: message, tool: tool, arguments: arguments, refusal: refusal)
        }
    }
}
