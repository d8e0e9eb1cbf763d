import ConfabProtocol
import ServiceSettings
import Tools
import WebConfig

/// Everything the daemon takes from its config file and environment.
public struct Settings {
    /// `[upstream]`: the provider named `default`.
    public var upstream = UpstreamConfig()
    /// `[providers.NAME]` tables, in the order written.
    public var providers: [Provider] = []
    /// Which provider a new conversation that names none uses.
    public var defaultProvider = Provider.defaultName
    /// `[profiles.NAME]` tables, in the order written.
    public var profiles: [Profile] = []
    /// Which profile a new conversation that names none uses; nil: none.
    public var defaultProfile: String?
    /// `[tools.NAME]` tables: HTTP tools a profile's conversations may let the model call.
    public var tools = ToolTable()
    /// `[mcp.NAME]` tables: MCP servers whose tools a profile's conversations may offer, in the order written.
    public var mcpServers: [MCPServerSettings] = []
    public var limits = BrokerLimits()
    public var fsync = true
    public var allowedUIDs: Set<UInt32> = []
    /// `[web]`: the browser gateway's, kept and checked here so that one file serves both.
    public var web = WebSettings()
    /// `prices` tables of the providers: what each reply cost (`usage`).
    public var prices = PriceTable()
    public var warnings: [String] = []

    public init() {}

    /// Every provider, `[upstream]` as `default` among them.
    public var providerTable: ProviderTable {
        ProviderTable([Provider(name: Provider.defaultName, config: upstream)] + providers, defaultName: defaultProvider)
    }

    public var profileTable: ProfileTable {
        ProfileTable(profiles, defaultName: defaultProfile)
    }

    /// Every configured secret: each provider's API key (`[upstream]`'s among them), the value
    /// of every provider header (`headers` may replace the API's own auth header:
    /// `api-key = "K"`, `Authorization = "Bearer K"`), and the value of each secret tool header
    /// (read from the environment or a file, or written inline under a credential's name), and
    /// likewise of each secret header of an MCP server over HTTP; of an MCP server, too, each
    /// `env` variable whose name is a credential's (`GITHUB_PERSONAL_ACCESS_TOKEN`,
    /// `API_KEY`) and what its `url` holds of a credential: a credential-named query parameter
    /// (`?api_key=…`), the userinfo's user and password, a path segment or query value that
    /// looks like a token (`MCPHTTPEndpoint.credentials`).
    /// Also each string of a provider's or profile's `extra_body` under a credential's name.
    public var secretValues: [String] {
        let configs = [upstream] + providers.map(\.config)
        let keys = configs.compactMap(\.apiKey)
        let providerHeaders = configs.flatMap(\.headers).map(\.value)
        let toolHeaders = tools.sorted.flatMap(\.headers).filter(\.isSecret).map(\.value)
        let mcpHeaders = mcpServers.compactMap(\.http).flatMap(\.headers).filter(\.isSecret).map(\.value)
        let mcpEnvironment = mcpServers.flatMap { server in
            server.environment.filter { ToolHeader.namesCredential($0.key) }.map(\.value).sorted()
        }
        let mcpQueries = mcpServers.compactMap(\.http).flatMap(\.credentials)
        // `extra_body` members under a credential's name, as headers are judged.
        let bodySecrets = configs.flatMap(\.options.secretValues) + profiles.flatMap(\.options.secretValues)
        return keys + providerHeaders + toolHeaders + mcpHeaders + mcpEnvironment + mcpQueries + bodySecrets
    }

    public var secrets: SecretRedactor { SecretRedactor(secrets: secretValues) }
}

/// The daemon's limits (`[limits]`): what one client, one conversation and the whole daemon may hold.
public struct BrokerLimits: Sendable, Equatable {
    public var maxLineBytes = 4 << 20
    public var maxClientBufferBytes = 16 << 20
    public var maxClients = 256
    public var maxQueuedSends = 16
    public var maxHistory = 1000
    /// How often text of a streaming reply is written to its log (no fsync).
    public var replySaveIntervalMilliseconds: UInt64 = 250
    /// Replies streaming from the upstream at once, across conversations; more wait their turn.
    public var maxStreams = 16
    /// First backoff; it doubles with each attempt, capped at 30 s, unless Retry-After says otherwise.
    public var retryBaseMilliseconds: UInt64 = 1000
    /// A conversation nobody has touched for this long, with nothing in flight, leaves memory.
    public var unloadIdleMilliseconds: UInt64 = 60_000
    /// Requests of one client still waiting for their answer (a search, a send being stored):
    /// at this many the daemon stops reading from the client until half of them are answered.
    public var maxUnansweredPerClient = 64
    /// Turns of one reply that may ask for tools; a turn asking again after that fails the reply.
    public var maxToolRounds = 8
    /// A call waiting for approval this long is denied.
    public var toolApprovalTimeoutSeconds = 600
    /// A `blob.put` upload that gets no chunk for this long is dropped (its bytes are in memory).
    public var uploadIdleSeconds = 300
    /// The room, in MiB, for files no message has named yet (`limits.attachment_room_mib`,
    /// 1 to 4096): uploads in progress held in memory across every connection; other users'
    /// share of that (half); the files one connection stored and has not sent with its uploads
    /// in progress (five eighths: 40 MiB, two messages' worth, by default); and another user's
    /// unsent files and uploads across all its connections (all of it).
    public var attachmentRoomMiB = 64
    public static let attachmentRoomRange = 1...4096
    public var maxUploadBytesInMemory: Int { attachmentRoomMiB << 20 }
    public var maxOtherUsersUploadBytesInMemory: Int { (attachmentRoomMiB << 20) / 2 }
    public var maxUnsentBlobBytes: Int { (attachmentRoomMiB << 20) / 8 * 5 }
    public var maxOtherUserUnsentBlobBytes: Int { attachmentRoomMiB << 20 }
    public init() {}
}
