import TOML

/// The `[web]` table of confab's config.toml: where the gateway listens and how share links
/// are made by default. One file holds both: confabd reads and checks `[web]` through this
/// type (and keeps it), and confab-web reads only `[web]`, through this same type.
public struct WebSettings: Equatable, Sendable {
    public var host = "127.0.0.1"
    public var port = 8410
    public var tlsCertificate: String?
    public var tlsKey: String?
    /// Listening beyond loopback without TLS, asked for knowingly (warned at every start).
    public var insecure = false
    /// How long a share link lasts unless `--expires` says otherwise; nil: until revoked.
    public var shareExpirySeconds: Int? = 24 * 3600
    /// Whether a share link is read-only unless `--write` says otherwise.
    public var shareReadOnly = false

    public init() {}

    public struct Problem: Error, Equatable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// Reads `[web]` from a config file's text; a file without it gives the defaults.
    public init(configText: String) throws(Problem) {
        let root: TOMLTable
        do { root = try TOMLTable(parsing: configText) } catch { throw Problem("config: \(error)") }
        guard let value = root["web"] else {
            self.init()
            return
        }
        guard case .table(let table) = value else { throw Problem("config: [web] must be a table") }
        try self.init(web: table)
    }

    /// Reads the `[web]` table itself: every key known, of its type, and checked together.
    public init(web table: TOMLTable) throws(Problem) {
        for member in table.members {
            let at = "config: web.\(member.key) (\(member.position))"
            switch (member.key, member.value) {
            case ("listen", .string(let listen)):
                guard let (host, port) = Self.parseListen(listen) else {
                    throw Problem("\(at): expected HOST:PORT, e.g. \"127.0.0.1:8410\" or \"[::1]:8410\"")
                }
                self.host = host
                self.port = port
            case ("tls_cert", .string(let path)): tlsCertificate = path
            case ("tls_key", .string(let path)): tlsKey = path
            case ("insecure", .boolean(let flag)): insecure = flag
            case ("share_expires", .string(let text)):
                if text == "never" {
                    shareExpirySeconds = nil
                } else {
                    guard let seconds = Self.parseDuration(text) else {
                        throw Problem("\(at): expected a duration such as \"30m\", \"2h\", \"7d\", or \"never\"")
                    }
                    shareExpirySeconds = seconds
                }
            case ("share_read_only", .boolean(let flag)): shareReadOnly = flag
            case ("listen", _), ("tls_cert", _), ("tls_key", _), ("share_expires", _):
                throw Problem("\(at): expected a string, got \(member.value.kindDescription)")
            case ("insecure", _), ("share_read_only", _):
                throw Problem("\(at): expected true or false, got \(member.value.kindDescription)")
            default:
                throw Problem("\(at): unknown key (known: listen, tls_cert, tls_key, insecure, share_expires, share_read_only)")
            }
        }
        if (tlsCertificate == nil) != (tlsKey == nil) {
            throw Problem("config: web.tls_cert and web.tls_key go together: give both or neither")
        }
    }

    public var usesTLS: Bool { tlsCertificate != nil }

    public var isLoopback: Bool { Self.isLoopback(host) }

    public static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// Refuses to serve beyond loopback in clear text unless told to; the warning to log at
    /// every start when told to.
    public func checkExposure() throws(Problem) -> String? {
        if isLoopback || usesTLS { return nil }
        if insecure {
            return "listening on \(host):\(port) without TLS (web.insecure = true): tokens and conversations cross the network in clear text"
        }
        throw Problem("listening on \(host):\(port), beyond loopback, needs web.tls_cert and web.tls_key (or web.insecure = true, which sends tokens in clear text)")
    }

    /// The base URL pages are served at.
    public var baseURL: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return (usesTLS ? "https" : "http") + "://\(shownHost):\(port)"
    }

    public static func parseListen(_ text: String) -> (String, Int)? {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (1...65535).contains(port) else { return nil }
        return (String(host), port)
    }

    /// "90s", "30m", "2h", "7d" (a number and one unit) in seconds.
    public static func parseDuration(_ text: String) -> Int? {
        guard let unit = text.last, let number = Int(text.dropLast()), number > 0 else { return nil }
        let factor: Int
        switch unit {
        case "s": factor = 1
        case "m": factor = 60
        case "h": factor = 3600
        case "d": factor = 86400
        default: return nil
        }
        let (seconds, overflow) = number.multipliedReportingOverflow(by: factor)
        return overflow || seconds > 3650 * 86400 ? nil : seconds
    }
}
