import ConfabProtocol

/// A tool's URL: text with `{name}` placeholders the arguments fill.
public enum ToolURLTemplate {
    public enum Part: Equatable, Sendable {
        case text(String)
        case placeholder(String)
    }

    /// The template cut into text and placeholders. A `{` or `}` that does not make a
    /// placeholder (`{}`, a lone brace, `{a{b}`) stays text; `problem(in:)` reports it.
    public static func parts(of template: String) -> [Part] {
        var parts: [Part] = []
        var text = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            text += rest[..<open]
            let after = rest[rest.index(after: open)...]
            guard let close = after.firstIndex(where: { $0 == "}" || $0 == "{" }), after[close] == "}", close > after.startIndex else {
                text += "{"
                rest = after
                continue
            }
            if !text.isEmpty { parts.append(.text(text)) }
            text = ""
            parts.append(.placeholder(String(after[..<close])))
            rest = after[after.index(after: close)...]
        }
        text += rest
        if !text.isEmpty { parts.append(.text(text)) }
        return parts
    }

    /// The placeholders' names, in the order written (a name used twice, twice).
    public static func placeholders(in template: String) -> [String] {
        parts(of: template).compactMap { part in
            if case .placeholder(let name) = part { return name }
            return nil
        }
    }

    /// The placeholders in the URL's path (before any `?` or `#`): their values must stay one
    /// segment, or part of one.
    public static func pathPlaceholders(in template: String) -> Set<String> {
        var names: Set<String> = []
        for part in parts(of: template) {
            switch part {
            case .text(let text):
                if text.contains("?") || text.contains("#") { return names }
            case .placeholder(let name):
                names.insert(name)
            }
        }
        return names
    }

    /// Why a path placeholder cannot take `value`, or nil when it can. Percent-encoding keeps a
    /// `/` from adding a segment, but `.` and `..` are unreserved, so they would go out as they
    /// are and name the segment itself or climb out of it, and an empty value would remove a
    /// segment (`/items//detail`): each would let the model send the call elsewhere than the
    /// config says. A value whose parts between slashes or backslashes are `.` or `..`
    /// (`../admin`) is refused too: a server that decodes `%2F` before it routes would climb.
    public static func pathValueProblem(_ value: JSON) -> String? {
        let text = text(of: value)
        if text.isEmpty { return "must not be empty: it fills a segment of the tool's URL path" }
        let parts = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "/" || $0 == "\\" })
        if parts.contains(where: { $0 == "." || $0 == ".." }) {
            return "must not be \".\" or \"..\", nor hold one between slashes: it fills a segment of the tool's URL path"
        }
        return nil
    }

    /// nil when the template is a usable tool URL; else what is wrong with it. It must be an
    /// http or https URL with a host, without spaces or control characters, every brace part
    /// of a placeholder, and no placeholder before the path: the config, not the model,
    /// decides where a call goes.
    public static func problem(in template: String) -> String? {
        let scheme = template.hasPrefix("http://") ? 7 : template.hasPrefix("https://") ? 8 : 0
        guard scheme > 0 else { return "must start with http:// or https://" }
        guard !template.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) else {
            return "must not hold spaces or control characters"
        }
        let parts = parts(of: template)
        for case .text(let text) in parts where text.contains("{") || text.contains("}") {
            return "has a { or } that is not part of a {placeholder}"
        }
        let authority = template.dropFirst(scheme).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.isEmpty else { return "must name a host" }
        if authority.contains("{") {
            return "must not have a {placeholder} before its path: the model must not choose where requests go"
        }
        return nil
    }

    /// `text` percent-encoded as RFC 3986 says: every UTF-8 byte but the unreserved
    /// characters (letters, digits, `-`, `.`, `_`, `~`) as `%XX`.
    public static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 15)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// An argument as URL text: a string as it is, null as nothing, anything else as its
    /// compact JSON text.
    static func text(of value: JSON) -> String {
        switch value {
        case .string(let text): text
        case .null: ""
        default: value.text
        }
    }

    /// `url` with `query` added to its query string (before any fragment).
    static func appendingQuery(_ query: String, to url: String) -> String {
        guard !query.isEmpty else { return url }
        let fragmentStart = url.firstIndex(of: "#") ?? url.endIndex
        let base = url[..<fragmentStart]
        let separator: String
        if !base.contains("?") {
            separator = "?"
        } else if base.hasSuffix("?") || base.hasSuffix("&") {
            separator = ""
        } else {
            separator = "&"
        }
        return base + separator + query + url[fragmentStart...]
    }
}
