/// Whether a link's host is this machine or the local network: loopback (127.0.0.0/8, ::1,
/// `localhost` and its subdomains, 0.0.0.0/8, which reaches this machine), the private ranges
/// (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16, fe80::/10), and IPv4
/// written as a browser would read it (`127.1`, `2130706433`, `0x7f.0.0.1`, mapped into IPv6).
/// A reply's link there is marked on the page: it leads to a service of this machine or
/// network, which somebody writing into the conversation may run or want the reader to open.
public enum LocalAddress {
    /// The host of an http(s) URL, lower case, percent-decoded, without brackets or a
    /// trailing dot; nil when there is none.
    public static func host(ofURL url: String) -> String? {
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { return nil }
        var rest = url[url.index(colon, offsetBy: 3)...]
        let stops: Set<Character> = ["/", "?", "#", "\\"]
        if let end = rest.firstIndex(where: { stops.contains($0) }) { rest = rest[..<end] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        var host: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
        } else {
            host = rest
            if let colon = host.lastIndex(of: ":") { host = host[..<colon] }
        }
        var decoded = percentDecoded(String(host)).lowercased()
        while decoded.hasSuffix(".") { decoded.removeLast() }
        return decoded.isEmpty ? nil : decoded
    }

    public static func isLocal(url: String) -> Bool {
        host(ofURL: url).map(isLocal(host:)) ?? false
    }

    public static func isLocal(host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        if host.contains(":") { return ipv6(host).map(isLocalIPv6) ?? false }
        if let address = ipv4(host) { return isLocalIPv4(address) }
        return false
    }

    static func isLocalIPv4(_ a: UInt32) -> Bool {
        let first = a >> 24, second = (a >> 16) & 0xFF
        return first == 127 || first == 0 || first == 10 || (first == 172 && (16...31).contains(second))
            || (first == 192 && second == 168) || (first == 169 && second == 254)
    }

    static func isLocalIPv6(_ words: [UInt16]) -> Bool {
        if words.dropLast().allSatisfy({ $0 == 0 }) && (words[7] == 1 || words[7] == 0) { return true } // ::1, ::
        if (words[0] & 0xFE00) == 0xFC00 || (words[0] & 0xFFC0) == 0xFE80 { return true }
        if words[0..<5].allSatisfy({ $0 == 0 }) && words[5] == 0xFFFF {           // ::ffff:a.b.c.d
            return isLocalIPv4(UInt32(words[6]) << 16 | UInt32(words[7]))
        }
        return false
    }

    /// IPv4 as the URL standard parses a host: one to four parts, each decimal, `0x` hex or
    /// `0` octal, the last filling what is left. Nil when it is not an address.
    static func ipv4(_ host: String) -> UInt32? {
        var parts = host.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if parts.last == "" { parts.removeLast() }
        guard (1...4).contains(parts.count) else { return nil }
        var numbers: [UInt64] = []
        for part in parts {
            guard let number = number(part) else { return nil }
            numbers.append(number)
        }
        guard numbers.dropLast().allSatisfy({ $0 <= 255 }) else { return nil }
        let lastBits = UInt64(8 * (5 - numbers.count))
        guard numbers.last! < (1 << lastBits) else { return nil }
        var value: UInt64 = 0
        for (index, number) in numbers.dropLast().enumerated() { value |= number << UInt64(24 - 8 * index) }
        return UInt32(value | numbers.last!)
    }

    private static func number(_ part: String) -> UInt64? {
        if part.isEmpty { return nil }
        if part.hasPrefix("0x") || part.hasPrefix("0X") {
            let digits = part.dropFirst(2)
            return digits.isEmpty ? 0 : (digits.count <= 16 ? UInt64(digits, radix: 16) : nil)
        }
        if part.count > 1 && part.hasPrefix("0") { return part.count <= 23 ? UInt64(part.dropFirst(), radix: 8) : nil }
        return part.count <= 19 ? UInt64(part, radix: 10) : nil
    }

    /// Eight 16-bit words, `::` expanded and a dotted IPv4 tail read; nil when it is not one.
    static func ipv6(_ text: String) -> [UInt16]? {
        var host = text
        if let percent = host.firstIndex(of: "%") { host = String(host[..<percent]) } // a zone
        var v4: UInt32?
        if let lastColon = host.lastIndex(of: ":"), host[host.index(after: lastColon)...].contains(".") {
            guard let parsed = ipv4(String(host[host.index(after: lastColon)...])) else { return nil }
            v4 = parsed
            host = String(host[...lastColon]) + "0:0"
        }
        func words(_ part: String) -> [UInt16]? {
            if part.isEmpty { return [] }
            var out: [UInt16] = []
            for piece in part.split(separator: ":", omittingEmptySubsequences: false) {
                guard !piece.isEmpty, piece.count <= 4, let word = UInt16(piece, radix: 16) else { return nil }
                out.append(word)
            }
            return out
        }
        var result: [UInt16]
        let halves = host.components(separatedByDoubleColon: ())
        if halves.count == 2 {
            guard let head = words(halves[0]), let back = words(halves[1]), head.count + back.count <= 7 else { return nil }
            result = head + Array(repeating: 0, count: 8 - head.count - back.count) + back
        } else if halves.count == 1 {
            guard let all = words(halves[0]) else { return nil }
            result = all
        } else {
            return nil
        }
        guard result.count == 8 else { return nil }
        if let v4 {
            result[6] = UInt16(v4 >> 16)
            result[7] = UInt16(v4 & 0xFFFF)
        }
        return result
    }

    private static func percentDecoded(_ text: String) -> String {
        guard text.contains("%") else { return text }
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.first {
            if byte == 0x25, utf8.count >= 3,
               let value = UInt8(String(decoding: utf8.dropFirst().prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
                utf8 = utf8.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension String {
    /// The text before and after each `::` (no Foundation here).
    func components(separatedByDoubleColon: Void) -> [String] {
        var parts: [String] = []
        var current = ""
        var scalars = Substring(self)
        while !scalars.isEmpty {
            if scalars.hasPrefix("::") {
                parts.append(current)
                current = ""
                scalars = scalars.dropFirst(2)
            } else {
                current.append(scalars.removeFirst())
            }
        }
        parts.append(current)
        return parts
    }
}
