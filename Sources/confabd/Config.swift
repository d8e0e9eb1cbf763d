import Broker
import Foundation
import Posix
import TOMLKit
import Upstream
#if canImport(Glibc)
import Glibc
#endif

/// `config.toml`, as documented in the README. Unknown keys are errors: a typo should not
/// silently leave a default in place.
struct ConfigFile: Decodable {
    struct UpstreamSection: Decodable {
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
    struct LimitsSection: Decodable {
        var max_line_bytes: Int?
        var max_client_buffer_bytes: Int?
        var max_clients: Int?
        var max_queued_sends: Int?
        var max_streams: Int?
    }
    struct StorageSection: Decodable {
        var fsync: Bool?
    }
    struct AccessSection: Decodable {
        var allow_uids: [Int]?
    }
    var upstream: UpstreamSection?
    var limits: LimitsSection?
    var storage: StorageSection?
    var access: AccessSection?
}

struct ConfigError: Error, CustomStringConvertible {
    let description: String
}

/// Everything the daemon takes from its config file and environment.
struct Settings {
    var upstream = UpstreamConfig()
    var limits = BrokerLimits()
    var fsync = true
    var allowedUIDs: Set<UInt32> = []
    var warnings: [String] = []

    /// Reads `path` (a missing file is fine unless `required`) and the environment.
    static func load(path: String, required: Bool, environment: [String: String]) throws -> Settings {
        var settings = Settings()
        var file = ConfigFile()
        var info = stat()
        if stat(path, &info) == 0 {
            let text = try readText(path, "config file")
            do {
                var decoder = TOMLDecoder()
                decoder.strictDecoding = true
                file = try decoder.decode(ConfigFile.self, from: text)
            } catch let error as TOMLParseError {
                throw ConfigError(description: "\(path): line \(error.source.begin.line): \(error.description)")
            } catch let error as UnexpectedKeysError {
                let keys = error.keys.keys.sorted().joined(separator: ", ")
                throw ConfigError(description: "\(path): unknown keys: \(keys)")
            } catch {
                throw ConfigError(description: "\(path): \(Self.describe(error))")
            }
            if file.upstream?.api_key != nil, info.st_mode & 0o077 != 0 {
                settings.warnings.append("\(path) holds an API key and can be read by others: chmod 600 \(path)")
            }
        } else if required || errno != ENOENT {
            throw ConfigError(description: "cannot read \(path): \(String(cString: strerror(errno)))")
        }

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
            settings.upstream.apiKey = key.trimmingCharacters(in: .whitespacesAndNewlines)
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

        func positive(_ value: Int?, _ name: String) throws -> Int? {
            guard let value else { return nil }
            guard value > 0 else { throw ConfigError(description: "limits.\(name) must be positive") }
            return value
        }
        if let value = try positive(file.limits?.max_line_bytes, "max_line_bytes") { settings.limits.maxLineBytes = value }
        if let value = try positive(file.limits?.max_client_buffer_bytes, "max_client_buffer_bytes") { settings.limits.maxClientBufferBytes = value }
        if let value = try positive(file.limits?.max_clients, "max_clients") { settings.limits.maxClients = value }
        if let value = try positive(file.limits?.max_queued_sends, "max_queued_sends") { settings.limits.maxQueuedSends = value }
        if let value = try positive(file.limits?.max_streams, "max_streams") { settings.limits.maxStreams = value }
        if let retries = upstream?.max_retries {
            guard (0...10).contains(retries) else { throw ConfigError(description: "upstream.max_retries must be between 0 and 10") }
            settings.limits.maxRetries = retries
        }
        settings.fsync = file.storage?.fsync ?? true
        settings.allowedUIDs = Set((file.access?.allow_uids ?? []).compactMap { UInt32(exactly: $0) })
        return settings
    }

    /// `$CREDENTIALS_DIRECTORY/<name>`, trimmed; nil when there is no such credential (or it
    /// is empty). A credential that exists but cannot be read is an error, not a silent fallback.
    private static func credential(_ name: String, environment: [String: String]) throws -> String? {
        guard let directory = environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/") else { return nil }
        let path = directory + "/" + name
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let text = try readText(path, "credential")
        let key = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return key.isEmpty ? nil : key
    }

    /// The whole file as UTF-8, through plain reads so that /dev/null and pipes work too.
    private static func readText(_ path: String, _ what: String) throws -> String {
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

    private static func describe(_ error: any Error) -> String {
        if let error = error as? DecodingError {
            switch error {
            case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context), .dataCorrupted(let context):
                let path = context.codingPath.map(\.stringValue).joined(separator: ".")
                return path.isEmpty ? context.debugDescription : "\(path): wrong type or value"
            @unknown default:
                return "\(error)"
            }
        }
        return "\(error)"
    }
}
