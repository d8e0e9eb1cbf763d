import ConfabProtocol
import DaemonSettings
import LogStore

extension Broker {
    /// `conversation.configure`: new settings for the replies that start after it. A reply in
    /// flight keeps the request it was started with.
    func configure(_ conversation: Conversation, _ params: ConfigureParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        let settings = try settings(for: conversation, params)
        conversation.log.append([.settings(settings)]) { [unowned self] error in
            if let error {
                logger.error("conversation=\(conversation.id) cannot store settings: \(error)")
                respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed, the settings were not changed: \(error)")))
                return
            }
            guard !conversation.isDeleted else {
                respond(.failure(.notFound("no conversation \(conversation.id)")))
                return
            }
            // Taken from the summary, which folded the record by the same rule as a read of the log.
            let header = conversation.log.summary.header
            conversation.model = header.model
            conversation.modelIsDefault = header.modelIsDefault
            conversation.system = header.system
            conversation.profile = header.profile
            conversation.params = header.params
            logger.info("conversation=\(conversation.id) configured client=\(client.id) model=\(header.model)\(header.profile.map { " profile=\($0)" } ?? "")")
            respond(.success(ConversationResult(conversation: conversation.info).json))
            conversation.broadcast(.conversationUpdated(conversation.info, by: client.info))
        }
    }

    /// The record a configure call writes, checked as `conversation.create` checks the same values.
    private func settings(for conversation: Conversation, _ params: ConfigureParams) throws(RPCError) -> ConversationSettings {
        var settings = ConversationSettings()
        var profile: Profile?
        if let name = params.profile {
            guard let named = profiles[name] else {
                let known = profiles.sorted.map(\.name)
                throw .invalidParams("parameter \"profile\": no profile \"\(name)\": "
                    + (known.isEmpty ? "the config has none" : "the config has \(known.joined(separator: ", "))"))
            }
            // A conversation keeps its provider: its earlier replies and its model belong to it.
            guard named.provider == conversation.provider else {
                throw .invalidParams("parameter \"profile\": profile \"\(name)\" uses provider \"\(named.provider)\", "
                    + "and this conversation's replies come from \"\(conversation.provider)\"")
            }
            profile = named
            settings.profile = name
        }
        guard let provider = providers[conversation.provider] else {
            throw .invalidParams("this conversation's provider \"\(conversation.provider)\" is no longer configured")
        }
        if let model = params.model {
            guard !model.isEmpty, model.count <= 200, !model.contains(where: { $0.isWhitespace }) else {
                throw .invalidParams("parameter \"model\" must be 1 to 200 characters without spaces")
            }
            settings.model = model
        } else if let profile {
            settings.model = profile.model ?? provider.config.model
            // A profile without a model leaves it to the default, which the conversation follows.
            if profile.model == nil, settings.model != nil { settings.modelIsDefault = true }
        }
        if let system = params.system {
            // Given as null or "": no system prompt from now on.
            settings.system = system
        } else if let profile {
            settings.system = profile.system ?? ""
        }
        let given = params.params
        if let profile {
            settings.params = profile.params.overridden(by: given ?? SamplingParameters())
        } else if let given {
            // Without a profile the values given change those the conversation has, one by one.
            settings.params = conversation.params.overridden(by: given)
        }
        if let sampling = settings.params, let key = sampling.keys.first(where: provider.api.unsupportedParameters.contains) {
            throw .invalidParams("parameter params.\(key.rawValue) is not one the \(provider.api.name) API takes (provider \"\(conversation.provider)\")")
        }
        guard !settings.isEmpty else {
            throw .invalidParams("nothing to change: give at least one of \"profile\", \"model\", \"system\" and \"params\"")
        }
        return settings
    }
}
