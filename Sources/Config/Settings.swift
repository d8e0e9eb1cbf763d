import Broker
import Posix
import TOML
import Upstream
#if canImport(Glibc)
import Glibc
#endif

/// `config.toml`, as documented in the README, as written: nothing checked but the types.
struct ConfigFile {
    struct UpstreamSection {
        var base_url: String?
        var model: String?
        var api_key: String?
        var api_key_file: String?
        var timeout_seconds: Int?
        var connect_timeout_seconds: Int?
        var temperature: Double?
        var max_tokens: Int?
        var max_retries: Int?
    }
    struct LimitsSection {
        var max_line_bytes: Int?
        var max_client_buffer_bytes: Int?
        var max_clients: Int?
        var max_queued_sends: Int?
        var max_streams: Int?
        var unload_idle_seconds: Int?
    }
    var upstream: UpstreamSection?
    var limits: LimitsSection?
    var fsync: Bool?
    var allow_uids: [Int]?

    /// Unknown keys are errors: a typo should not silently leave a default in place.
    init(_ document: TOMLTable, file: String) throws(ConfigError) {
        var root = ConfigTable(file: file, table: document)
        upstream = try root.table("upstream") { (table: inout ConfigTable) throws(ConfigError) in
            UpstreamSection(
                base_url: try table.string("base_url"),
                model: try table.string("model"),
                api_key: try table.string("api_key"),
                api_key_file: try table.string("api_key_file"),
                timeout_seconds: try table.integer("timeout_seconds"),
                connect_timeout_seconds: try table.integer("connect_timeout_seconds"),
                temperature: try table.number("temperature"),
                max_tokens: try table.integer("max_tokens"),
                max_retries: try table.integer("max_retries"))
        }
        limits = try root.table("limits") { (table: inout ConfigTable) throws(ConfigError) in
            LimitsSection(
                max_line_bytes: try table.integer("max_line_bytes"),
                max_client_buffer_bytes: try table.integer("max_client_buffer_bytes"),
                max_clients: try table.integer("max_clients"),
                max_queued_sends: try table.integer("max_queued_sends"),
                max_streams: try table.integer("max_streams"),
                unload_idle_seconds: try table.integer("unload_idle_seconds"))
        }
        fsync = try root.table("storage") { (table: inout ConfigTable) throws(ConfigError) in try table.boolean("fsync") } ?? nil
        allow_uids = try root.table("access") { (table: inout ConfigTable) throws(ConfigError) in try table.integers("allow_uids") } ?? nil
        try root.rejectUnknownKeys()
    }

    init() {}
}

/// Everything the daemon takes from its config file and environment.
public struct Settings {
    public var upstream = UpstreamConfig()
    public var limits = BrokerLimits()
    public var fsync = true
    public var allowedUIDs: Set<UInt32> = []
    public var warnings: [String] = []

    public init() {}

    /// Reads `path` (a missing file is fine unless `required`) and the environment.
    public static func load(path: String, required: Bool, environment: [String: String]) throws(ConfigError) -> Settings {
        var info = stat()
        guard stat(path, &info) == 0 else {
            guard !required && errno == ENOENT else {
                throw ConfigError(description: "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            return try resolve(ConfigFile(), environment: environment)
        }
        let file = try parse(readText(path, "config file"), path: path)
        var settings = try resolve(file, environment: environment)
        if file.upstream?.api_key != nil, info.st_mode & 0o077 != 0 {
            settings.warnings.insert("\(path) holds an API key and can be read by others: chmod 600 \(path)", at: 0)
        }
        return settings
    }

    /// The settings `text` (the contents of the file at `path`) gives with `environment`.
    public static func load(text: String, path: String, environment: [String: String]) throws(ConfigError) -> Settings {
        try resolve(parse(text, path: path), environment: environment)
    }

    private static func parse(_ text: String, path: String) throws(ConfigError) -> ConfigFile {
        let document: TOMLTable
        do {
            document = try TOMLTable(parsing: text)
        } catch {
            throw ConfigError(description: "\(path): \(error)")
        }
        return try ConfigFile(document, file: path)
    }

    /// Checks the file's values and fills in what it leaves out from the environment.
    private static func resolve(_ file: ConfigFile, environment: [String: String]) throws(ConfigError) -> Settings {
        var settings = Settings()
        let upstream = file.upstream
        if let url = upstream?.base_url ?? environment["OPENAI_BASE_URL"], !url.isEmpty {
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                throw ConfigError(description: "upstream.base_url must start with http:// or https://")
            }
            settings.upstream.baseURL = url
        }
        if let model = upstream?.model { settings.upstream.model = model }
        if let key = upstream?.api_key {
            settings.upstream.apiKey = key
        } else if let keyFile = upstream?.api_key_file {
            let key = try readText(keyFile, "upstream.api_key_file")
            settings.upstream.apiKey = key.trimmingWhitespace
            // As ssh does for private keys; the key itself is never part of the message.
            var keyInfo = stat()
            if stat(keyFile, &keyInfo) == 0, keyInfo.st_mode & S_IFMT == S_IFREG, keyInfo.st_mode & 0o044 != 0 {
                settings.warnings.append("the API key file \(keyFile) (upstream.api_key_file) can be read by others: chmod 600 \(keyFile)")
            }
        } else if let key = try credential("openai-api-key", environment: environment) {
            // systemd's LoadCredential=openai-api-key:… (confabd.service).
            settings.upstream.apiKey = key
        } else if let key = environment["OPENAI_API_KEY"], !key.isEmpty {
            settings.upstream.apiKey = key
        }
        if let seconds = upstream?.timeout_seconds {
            guard seconds > 0 else { throw ConfigError(description: "upstream.timeout_seconds must be positive") }
            settings.upstream.timeoutSeconds = seconds
        }
        if let seconds = upstream?.connect_timeout_seconds {
            guard seconds > 0 else { throw ConfigError(description: "upstream.connect_timeout_seconds must be positive") }
            settings.upstream.connectTimeoutSeconds = seconds
        }
        settings.upstream.temperature = upstream?.temperature
        settings.upstream.maxTokens = upstream?.max_tokens

        func positive(_ value: Int?, _ name: String) throws(ConfigError) -> Int? {
            guard let value else { return nil }
            guard value > 0 else { throw ConfigError(description: "limits.\(name) must be positive") }
            return value
        }
        if let value = try positive(file.limits?.max_line_bytes, "max_line_bytes") { settings.limits.maxLineBytes = value }
        if let value = try positive(file.limits?.max_client_buffer_bytes, "max_client_buffer_bytes") { settings.limits.maxClientBufferBytes = value }
        if let value = try positive(file.limits?.max_clients, "max_clients") { settings.limits.maxClients = value }
        if let value = try positive(file.limits?.max_queued_sends, "max_queued_sends") { settings.limits.maxQueuedSends = value }
        if let value = try positive(file.limits?.max_streams, "max_streams") { settings.limits.maxStreams = value }
        if let value = try positive(file.limits?.unload_idle_seconds, "unload_idle_seconds") {
            settings.limits.unloadIdleMilliseconds = UInt64(value) * 1000
        }
        if let retries = upstream?.max_retries {
            guard (0...10).contains(retries) else { throw ConfigError(description: "upstream.max_retries must be between 0 and 10") }
            settings.limits.maxRetries = retries
        }
        settings.fsync = file.fsync ?? true
        settings.allowedUIDs = Set((file.allow_uids ?? []).compactMap { UInt32(exactly: $0) })
        return settings
    }

    /// `$CREDENTIALS_DIRECTORY/<name>`, trimmed; nil when there is no such credential (or it
    /// is empty). A credential that exists but cannot be read is an error, not a silent fallback.
    private static func credential(_ name: String, environment: [String: String]) throws(ConfigError) -> String? {
        guard let directory = environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/") else { return nil }
        let path = directory + "/" + name
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let key = try readText(path, "credential").trimmingWhitespace
        return key.isEmpty ? nil : key
    }

    /// The whole file as UTF-8, through plain reads so that /dev/null and pipes work too.
    private static func readText(_ path: String, _ what: String) throws(ConfigError) -> String {
        let bytes: [UInt8]
        do {
            bytes = try Files.readAll(path: path, limit: 1 << 20)
        } catch {
            throw ConfigError(description: "cannot read \(what) \(path): \(error)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigError(description: "\(what) \(path) is not UTF-8")
        }
        return text
    }
}

extension String {
    /// Without white space or line breaks at either end: a key file usually ends in a newline.
    var trimmingWhitespace: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last])
    }
}
