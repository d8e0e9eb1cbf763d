// The words of the wire protocol (docs/protocol.md), spelled once for the daemon and the
// client alike: a misspelt method or notification is a compile error on both ends.

/// A method a client calls.
public enum RPCMethod: String, CaseIterable, Sendable {
    case hello
    case status
    case conversationCreate = "conversation.create"
    case conversationList = "conversation.list"
    case conversationGet = "conversation.get"
    case conversationRename = "conversation.rename"
    case conversationDelete = "conversation.delete"
    case conversationAttach = "conversation.attach"
    case conversationDetach = "conversation.detach"
    case conversationHistory = "conversation.history"
    case messageSend = "message.send"
    case generationCancel = "generation.cancel"
    case messageRegenerate = "message.regenerate"
    case messageEdit = "message.edit"
    case messageContinue = "message.continue"
    case conversationFork = "conversation.fork"
    case conversationSearch = "conversation.search"
    case modelsList = "models.list"
    case profilesList = "profiles.list"
    case conversationConfigure = "conversation.configure"
    case toolApprove = "tool.approve"
    case conversationShare = "conversation.share"
    case conversationUnshare = "conversation.unshare"
    case blobPut = "blob.put"
    case attachmentGet = "attachment.get"
    case toolsList = "tools.list"
    case mcpRestart = "mcp.restart"
    case usageSummary = "usage.summary"
    case conversationCompact = "conversation.compact"
    case conversationUncompact = "conversation.uncompact"
}

/// A notification the daemon sends.
public enum RPCNotification: String, CaseIterable, Sendable {
    case messageCreated = "message.created"
    case messageDelta = "message.delta"
    case messageCompleted = "message.completed"
    case messageRetrying = "message.retrying"
    case messageFailed = "message.failed"
    case messageSuperseded = "message.superseded"
    case messageContinued = "message.continued"
    case generationCancelled = "generation.cancelled"
    case toolApprovalRequested = "tool.approval_requested"
    case toolApproved = "tool.approved"
    case toolDenied = "tool.denied"
    case toolStarted = "tool.started"
    case toolCompleted = "tool.completed"
    case conversationUpdated = "conversation.updated"
    case conversationDeleted = "conversation.deleted"
    case clientAttached = "client.attached"
    case clientDetached = "client.detached"
    case serverStopping = "server.stopping"
    /// The conversation's owner took this user's share away: the client is detached.
    case conversationUnshared = "conversation.unshared"
    /// A call in flight reported how far it is (an MCP server's progress notification).
    case toolProgress = "tool.progress"
    /// A piece of a reply's reasoning (the model's thinking before or between its answers).
    case messageReasoning = "message.reasoning"
    /// A summary of the conversation is being written (`conversation.compact`, or before a reply).
    case compactionStarted = "compaction.started"
    /// A piece of the summary's text.
    case compactionDelta = "compaction.delta"
    /// The summary is stored and in force.
    case compactionCompleted = "compaction.completed"
    /// The summary failed or was cancelled: nothing was stored.
    case compactionFailed = "compaction.failed"
    /// The summary in force ended (`conversation.uncompact`, or an edit inside its range).
    case compactionUndone = "compaction.undone"
}

/// Who wrote a message. Logs hold `user`, `assistant` and `tool` (a tool's result); `system`
/// is the conversation's system prompt as it is sent upstream.
public enum Role: String, CaseIterable, Sendable {
    case user, assistant, system, tool
}

/// Why a reply failed: `error.code` of a failed message and of `message.failed`.
public enum ReplyErrorCode: String, CaseIterable, Sendable {
    /// The upstream answered 401 or 403.
    case upstreamAuth = "upstream_auth"
    /// The upstream answered 429.
    case rateLimited = "rate_limited"
    /// Any other non-2xx answer; `status` is set.
    case upstreamHTTP = "upstream_http"
    /// An `error` object arrived inside the stream.
    case upstreamError = "upstream_error"
    /// Connecting failed.
    case upstreamConnection = "upstream_connection"
    /// No byte for `upstream.timeout_seconds`.
    case upstreamTimeout = "upstream_timeout"
    /// Not a chat-completions event stream, or it ended before the reply finished.
    case upstreamProtocol = "upstream_protocol"
    /// No API key while the base URL needs one.
    case notConfigured = "not_configured"
    /// The reply could not be written to the log.
    case storage
    /// The system prompt, the newest user message and room for the reply do not fit in the
    /// conversation's `context_tokens`: no request was made.
    case contextTooLarge = "context_too_large"
    /// The model asked for tools more than `limits.max_tool_rounds` times in one reply.
    case toolRounds = "tool_rounds"
    /// The model spent its whole `max_tokens` (or `max_completion_tokens`) thinking and wrote
    /// no answer: there is no text to continue; raise the limit or lower the effort.
    case thinkingExhausted = "thinking_exhausted"
    // The codes below are a tool message's (`role: "tool"`): why a call gave no answer.
    /// The arguments were not JSON, or did not match the tool's parameters.
    case toolArguments = "tool_arguments"
    /// The model named a tool this conversation does not offer.
    case toolUnavailable = "tool_unavailable"
    /// A person said no (`tool.approve` with `allow: false`), or nobody answered in time.
    case toolDenied = "tool_denied"
    /// The tool did not answer within its `timeout_seconds`.
    case toolTimeout = "tool_timeout"
    /// The tool's server could not be reached, or the transfer failed.
    case toolConnection = "tool_connection"
    /// The tool answered that it failed (an MCP server's `isError`, or its error response).
    case toolError = "tool_error"
}

extension RPC {
    public static func request(id: JSON, method: RPCMethod, params: JSON? = nil) -> [UInt8] {
        request(id: id, method: method.rawValue, params: params)
    }

    public static func notification(_ notification: RPCNotification, params: JSON) -> [UInt8] {
        self.notification(method: notification.rawValue, params: params)
    }
}
