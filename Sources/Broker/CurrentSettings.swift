import ConfabLog
import DaemonSettings
import ServiceSettings
import Tools
import Upstream

/// The settings in force, shared by the broker and its reply runner: one value, replaced whole
/// on reload (`Broker.settings`), with the lookup tables built from it once per replacement
/// rather than at every use.
final class CurrentSettings {
    private(set) var value: Settings
    /// Every provider by name: replies from a replacement on, and retries, use the new table.
    private(set) var providers: ProviderTable
    /// Conversations created from a replacement on use the new profiles; those created before
    /// keep what they recorded, but for `context_tokens`, read per reply.
    private(set) var profiles: ProfileTable
    /// Every secret any settings held since the daemon started, gathered once per replacement
    /// (a log line or an error from outside is redacted with it). A reload adds to it and
    /// never takes away: a reply or a tool call started before a reload still runs with the
    /// old key, and a server may echo that one.
    private(set) var secrets: SecretRedactor
    /// The values behind `secrets`.
    private var secretValues: Set<String>
    /// The daemon's log, redacting the current secrets.
    private(set) var logger: Logger

    init(_ value: Settings, logger: Logger) {
        self.value = value
        providers = value.providerTable
        profiles = value.profileTable
        secretValues = Set(value.secretValues)
        secrets = SecretRedactor(secrets: secretValues)
        self.logger = logger
        self.logger.redacting = { [secrets] in secrets.redacting($0) }
    }

    var limits: BrokerLimits { value.limits }
    /// Turns that start from a replacement on offer the new tools.
    var tools: ToolTable { value.tools }
    /// uids besides our own that may connect.
    var allowedUIDs: Set<UInt32> { value.allowedUIDs }

    func replace(with value: Settings) {
        self.value = value
        providers = value.providerTable
        profiles = value.profileTable
        let known = secretValues.count
        secretValues.formUnion(value.secretValues)
        if secretValues.count != known { secrets = SecretRedactor(secrets: secretValues) }
        logger.redacting = { [secrets] in secrets.redacting($0) }
    }
}
