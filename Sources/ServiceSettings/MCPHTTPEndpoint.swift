import Tools

/// Where an MCP server reached over Streamable HTTP is: its endpoint, and the headers every
/// request to it carries (secret ones among them: never printed).
public struct MCPHTTPEndpoint: Sendable, Equatable {
    public var url: String
    public var headers: [ToolHeader]

    public init(url: String, headers: [ToolHeader] = []) {
        self.url = url
        self.headers = headers
    }

    /// The values of the URL's query parameters whose names are a credential's
    /// (`?api_key=…`, `?access_token=…`): secrets, as they are written and percent-decoded.
    public var queryCredentials: [String] {
        guard let question = url.firstIndex(of: "?") else { return [] }
        var found: [String] = []
        for parameter in url[url.index(after: question)...].split(separator: "&") {
            let parts = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[1].isEmpty, ToolHeader.namesCredential(Self.percentDecoded(parts[0])) else { continue }
            let written = String(parts[1])
            found.append(written)
            let decoded = Self.percentDecoded(parts[1])
            if decoded != written { found.append(decoded) }
        }
        return found
    }

    /// Every secret the URL holds, as written and percent-decoded: the values of credential-named
    /// query parameters (`queryCredentials`), the user and password of its userinfo
    /// (`https://user:password@host/`, and the pair as Basic authentication sends it), and
    /// each path segment and query value that looks like a token (`looksLikeToken`:
    /// `/mcp/sk-ak-3f9a…/sse`, `?key=550e8400-e29b-…`).
    public var credentials: [String] {
        var found = queryCredentials
        func add(_ written: Substring) {
            guard !written.isEmpty else { return }
            found.append(String(written))
            let decoded = Self.percentDecoded(written)
            if decoded != String(written) { found.append(decoded) }
        }
        // The URL was checked to start with http:// or https://.
        let rest = url.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false).count == 3
            ? url.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)[2] : Substring(url)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") {
            let userinfo = authority[..<at]
            add(userinfo)
            if let colon = userinfo.firstIndex(of: ":") {
                add(userinfo[..<colon])
                add(userinfo[userinfo.index(after: colon)...])
            }
        }
        let afterAuthority = rest[authorityEnd...]
        let queryStart = afterAuthority.firstIndex(of: "?") ?? afterAuthority.endIndex
        for segment in afterAuthority[..<queryStart].split(separator: "/") where Self.looksLikeToken(Self.percentDecoded(segment)) {
            add(segment)
        }
        if queryStart < afterAuthority.endIndex {
            for parameter in afterAuthority[afterAuthority.index(after: queryStart)...].split(separator: "&") {
                let parts = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, Self.looksLikeToken(Self.percentDecoded(parts[1])) else { continue }
                add(parts[1])
            }
        }
        var seen: Set<String> = []
        return found.filter { seen.insert($0).inserted }
    }

    /// Whether a path segment or query value looks like a key or token rather than a word:
    /// 16 or more characters of a token's alphabet (letters, digits, `-._~+/=`) mixing at
    /// least two letters with two digits (`sk-ak-3f9a0c…`, a UUID), or 32 or more of them
    /// whatever they mix. `mcp`, `v1`, `eu-west-1a`, `streamable-http` are not.
    public static func looksLikeToken(_ text: String) -> Bool {
        let scalars = text.unicodeScalars
        guard scalars.count >= 16, scalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-._~+/=".unicodeScalars.contains($0)) })
        else { return false }
        if scalars.count >= 32 { return true }
        let digits = scalars.filter { ("0"..."9").contains($0) }.count
        let letters = scalars.filter { $0.properties.isAlphabetic }.count
        return digits >= 2 && letters >= 2
    }

    /// `%XX` as its byte and `+` as a space, as a query is written; a malformed escape stays as it is.
    static func percentDecoded(_ text: Substring) -> String {
        let bytes = Array(text.utf8)
        var decoded: [UInt8] = []
        var index = 0
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 0x30...0x39: byte - 0x30
            case 0x41...0x46: byte - 0x41 + 10
            case 0x61...0x66: byte - 0x61 + 10
            default: nil
            }
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x25, index + 2 < bytes.count, let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2]) {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(byte == 0x2B ? 0x20 : byte)
                index += 1
            }
        }
        return String(decoding: decoded, as: UTF8.self)
    }
}
