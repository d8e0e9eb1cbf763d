import ConfabProtocol

extension Broker {
    /// `tool.approve`: the first answer to a call waiting for a person's yes decides it.
    func approve(_ conversation: Conversation, _ params: ApproveParams, _ client: ClientSession) throws(RPCError) -> ApproveResult {
        let (call, allow) = (params.call, params.allow)
        guard !call.isEmpty, call.utf8.count <= 256 else { throw .invalidParams("parameter \"call\" is not a tool call id") }
        guard replies.answerApproval(of: call, allow: allow, in: conversation, by: client) else {
            throw .conflict("no call \(call) is waiting for approval in conversation \(conversation.id): it was answered already, or has ended")
        }
        return ApproveResult(call: call, allowed: allow)
    }
}
