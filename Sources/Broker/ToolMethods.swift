import ConfabProtocol

extension Broker {
    /// `tool.approve`: the first answer to a call waiting for a person's yes decides it.
    func approve(_ conversation: Conversation, _ params: Params, _ client: ClientSession) throws(RPCError) -> JSON {
        let call = try params.string("call")
        guard !call.isEmpty, call.utf8.count <= 256 else { throw .invalidParams("parameter \"call\" is not a tool call id") }
        guard let allow = try params.optionalBool("allow") else { throw .invalidParams("missing parameter \"allow\" (true or false)") }
        guard replies.answerApproval(of: call, allow: allow, in: conversation, by: client) else {
            throw .conflict("no call \(call) is waiting for approval in conversation \(conversation.id): it was answered already, or has ended")
        }
        return ["call": .string(call), "allowed": .bool(allow)]
    }
}
