import ConfabLog
import ConfabProtocol
import Tools

/// The `[tools.NAME]` tables: each tool an HTTP request, in the one shared name-space (a
/// tool's configured name is the model's), always ready.
final class HTTPToolSource: ToolSource {
    private let settings: CurrentSettings
    private let upstream: any ReplyUpstream

    init(settings: CurrentSettings, upstream: any ReplyUpstream) {
        self.settings = settings
        self.upstream = upstream
    }

    var kind: ToolSourceKind { .http }

    /// An entry that is a configured tool's whole name (which may hold a dot).
    func serves(_ entry: QualifiedToolName) -> Bool { settings.tools[entry.text] != nil }

    /// In the entries' order; every tool sorted by name when there are none.
    func offered(for entries: [QualifiedToolName]?, includingUnready: Bool) -> [OfferedTool] {
        let definitions = entries.map { $0.compactMap { settings.tools[$0.text] } } ?? settings.tools.sorted
        return definitions.map { definition in
            OfferedTool(space: nil, tool: definition.name, description: definition.description, parameters: definition.parameters,
                        approval: definition.approval, source: self, detail: definition)
        }
    }

    func validate(_ tool: OfferedTool, arguments: String) -> Result<JSON, ToolArgumentError> {
        (tool.detail as! ToolDefinition).validate(arguments: arguments)
    }

    func start(_ tool: OfferedTool, arguments: JSON, as call: ToolCallContext,
               progress: @escaping (ToolCallProgress) -> Void, done: @escaping (ToolCallEnding) -> Void) -> any ToolCallHandle {
        let definition = tool.detail as! ToolDefinition
        let logger = settings.logger
        let request = definition.httpRequest(arguments: arguments)
        // Neither the query (the model's arguments, perhaps a key written into the URL) nor the
        // headers (some are secrets) are logged.
        let path = request.url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.url
        logger.info("conversation=\(call.conversation) call=\(call.call) tool=\(definition.name) \(request.method.rawValue) \(ReplyRunner.loggable(path))")
        let handle = HTTPToolCall()
        handle.transfer = upstream.startToolCall(method: request.method.rawValue, url: request.url, headers: request.headers, body: request.body,
                                              timeoutSeconds: definition.timeoutSeconds, maxResponseBytes: definition.maxResponseBytes) {
            [settings] outcome in
            guard !handle.isCancelled else { return }
            handle.transfer = nil
            let secrets = settings.secrets
            if let error = outcome.error {
                settings.logger.warning("conversation=\(call.conversation) call=\(call.call) tool=\(definition.name) failed: \(error.code.rawValue) after \(outcome.durationMilliseconds) ms")
                let error = MessageError(code: error.code, message: secrets.redacting(definition.redactingSecrets(error.message)), status: error.status)
                return done(ToolCallEnding(status: .failed, error: error, content: "Error: \(error.message).",
                                           durationMilliseconds: outcome.durationMilliseconds, httpStatus: outcome.status))
            }
            let status = outcome.status ?? 0
            // Redacted before the cut marker is added: a key the cut split is still a key.
            let answer = ToolResponse.content(status: status, body: outcome.body, totalBytes: outcome.totalBytes,
                                              cap: definition.maxResponseBytes, secrets: secrets)
            let content = secrets.redacting(definition.redactingSecrets(answer.content))
            settings.logger.info("conversation=\(call.conversation) call=\(call.call) tool=\(definition.name) status=\(status) bytes=\(outcome.totalBytes) ms=\(outcome.durationMilliseconds)")
            done(ToolCallEnding(status: .complete, error: nil, content: content, durationMilliseconds: outcome.durationMilliseconds,
                                httpStatus: outcome.status, truncated: answer.truncated))
        }
        return handle
    }
}

private final class HTTPToolCall: ToolCallHandle {
    var transfer: (any UpstreamCall)?
    private(set) var isCancelled = false

    func cancel() {
        isCancelled = true
        transfer?.cancel()
        transfer = nil
    }
}
