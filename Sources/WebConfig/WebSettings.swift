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
    /// Open pages (WebSockets, each with its own connection to confabd) in all, …
    public var maxPages = 64
    /// … on any one share link, …
    /// Below the ten attaches at once that confabd's presence budget gives a link (Presence.swift):
    /// past it the gateway refuses with its own words (4429) before the daemon would.
    public var maxPagesPerLink = 8
    /// … and how many of `maxPages` only the owner's pages may take.
    public var ownerReservedPages = 8
    /// File downloads at once, in all and on any one share link.
    public var maxDownloads = 4
    public var maxDownloadsPerLink = 2
    /// Names besides the listen address and `localhost` that browsers may reach the gateway
    /// by (its `Host`, and the pages' `Origin`), e.g. a name on the local network.
    public var hostNames: [String] = []

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
            case ("max_pages", .integer(let number)), ("max_pages_per_link", .integer(let number)),
                 ("owner_reserved_pages", .integer(let number)), ("max_downloads", .integer(let number)),
                 ("max_downloads_per_link", .integer(let number)):
                let least = member.key == "owner_reserved_pages" ? 0 : 1
                guard number >= least, number <= 100_000 else { throw Problem("\(at): expected a number from \(least) to 100000") }
                switch member.key {
                case "max_pages": maxPages = Int(number)
                case "max_pages_per_link": maxPagesPerLink = Int(number)
                case "owner_reserved_pages": ownerReservedPages = Int(number)
                case "max_downloads": maxDownloads = Int(number)
                default: maxDownloadsPerLink = Int(number)
                }
            case ("hosts", .array(let values)):
                hostNames = []
                for value in values {
                    guard case .string(let name) = value, Self.isHostName(name) else {
                        throw Problem("\(at): expected host names such as [\"phone.lan\"] (no port, scheme or path)")
                    }
                    hostNames.append(name.lowercased())
                }
            case ("max_pages", _), ("max_pages_per_link", _), ("owner_reserved_pages", _), ("max_downloads", _),
                 ("max_downloads_per_link", _):
                throw Problem("\(at): expected a number, got \(member.value.kindDescription)")
            case ("hosts", _):
                throw Problem("\(at): expected an array of host names, got \(member.value.kindDescription)")
            case ("listen", _), ("tls_cert", _), ("tls_key", _), ("share_expires", _):
                throw Problem("\(at): expected a string, got \(member.value.kindDescription)")
            case ("insecure", _), ("share_read_only", _):
                throw Problem("\(at): expected true or false, got \(member.value.kindDescription)")
            default:
                throw Problem("\(at): unknown key (known: listen, tls_cert, tls_key, insecure, share_expires, share_read_only, max_pages, max_pages_per_link, owner_reserved_pages, max_downloads, max_downloads_per_link, hosts)")
            }
        }
        if ownerReservedPages >= maxPages {
            throw Problem("config: web.owner_reserved_pages (\(ownerReservedPages)) must be less than web.max_pages (\(maxPages))")
        }
        if (tlsCertificate == nil) != (tlsKey == nil) {
            throw Problem("config: web.tls_cert and web.tls_key go together: give both or neither")
        }
    }

    public var usesTLS: Bool { tlsCertificate != nil }

    /// A plain DNS name or address, as `hosts` takes it.
    static func isHostName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 253
            && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
                || $0 == 0x2E || $0 == 0x2D }
    }

    /// The names the gateway answers to: its listen address, `localhost` (and the loopback
    /// addresses when it listens on loopback), and `web.hosts`. Lower case; IPv6 in brackets.
    public var hostNamesAllowed: [String] {
        var names = [host.contains(":") ? "[\(host.lowercased())]" : host.lowercased(), "localhost"]
        if isLoopback { names += ["127.0.0.1", "[::1]"] }
        for name in hostNames where !names.contains(name) { names.append(name) }
        return names
    }

    /// Whether a request's `Host` (or HTTP/2 authority) names this gateway: one of the
    /// allowed names with this port, or without a port where the scheme's default is it.
    /// Anything else (a DNS-rebound name above all) is refused.
    public func allowsHost(_ authority: String) -> Bool {
        let value = authority.lowercased()
        let names = hostNamesAllowed
        if names.contains(where: { value == $0 + ":\(port)" }) { return true }
        return port == (usesTLS ? 443 : 80) && names.contains(value)
    }

    /// Whether a request's `Origin` is one of this gateway's own: the scheme it serves, an
    /// allowed name and its port. Compared with the list, never with the request's `Host`.
    public func allowsOrigin(_ origin: String) -> Bool {
        let prefix = usesTLS ? "https://" : "http://"
        guard origin.hasPrefix(prefix) else { return false }
        return allowsHost(String(origin.dropFirst(prefix.count)))
    }

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

    /// The owner's link: the token in the fragment, which the browser never sends to a
    /// server (nor a log, nor a Referer); the page's script keeps it in its origin's storage.
    public func ownerURL(token: String) -> String { baseURL + "/#token=" + token }

    /// A share link, in the same form, landing on `/s`.
    public func shareURL(token: String) -> String { baseURL + "/s#token=" + token }

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
