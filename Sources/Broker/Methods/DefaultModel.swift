import ConfabProtocol
import DaemonSettings

/// A conversation never given a model follows the configured default: the model a new
/// conversation of its provider (and profile) would get with none named. It is set when the
/// daemon starts and whenever the config is loaded again, so the next reply uses it; the log is
/// not written (its header still says the model it was created with, and `model_default`).
extension Broker {
    /// The model a conversation of `provider` and `profile` gets when it names none; nil when
    /// the config gives none (the conversation then keeps the model it has).
    func defaultModel(provider: String, profile: String?) -> String? {
        let chosen = profile.flatMap { profiles[$0] } ?? (profile == nil ? profiles.defaultProfile : nil)
        if let chosen, chosen.provider == provider, let model = chosen.model { return model }
        return providers[provider]?.config.model
    }

    /// Brings every default-following conversation to the default now configured.
    func followDefaultModels() {
        for conversation in conversations.values where conversation.modelIsDefault {
            guard let model = defaultModel(provider: conversation.provider, profile: conversation.profile),
                  model != conversation.model else { continue }
            logger.info("conversation=\(conversation.id) follows the default model: \(conversation.model) -> \(model)")
            conversation.model = model
        }
    }
}

extension ConversationInfo {
    func withModelDefault(_ isDefault: Bool) -> ConversationInfo {
        var info = self
        info.modelIsDefault = isDefault
        return info
    }
}
