/// Replaces every configured secret (provider API keys, the values of tool headers read from
/// the environment or a file) with `[secret]` in text that came from outside and is about to be
/// stored, sent to a client or the model, or logged: a tool that echoes its request, a model
/// server whose 401 body repeats the key, an error that quotes a header.
///
/// Text from outside rarely holds a secret as its plain bytes: a JSON body escapes it
/// (`k3y\/with\/slash`, `tok\"en`, `\u0073k-…`, escaped again when a JSON string holds JSON),
/// a URL or form percent-encodes it (`%2F`, `+` for a space), Basic authentication and many
/// echo services base64 it. Each secret is therefore looked for as a sequence of characters
/// each of which may be written plainly, behind a run of backslashes, as a JSON escape
/// (`\"`, `\/`, `\n`, `\uXXXX`, a surrogate pair), or as `%XX` bytes; and as its base64 in the
/// standard and the URL alphabets, at each of the three alignments it can have inside a longer
/// base64 text. What matched, escapes included, becomes `[secret]`.
///
/// A secret shorter than `minimumLength` bytes is not looked for: it would blot out ordinary
/// words (an `api_key = "test"` would take every "test" out of every tool answer); the
/// config's secrets are keys and tokens, far longer.
public struct SecretRedactor: Sendable, Equatable {
    public static let replacement = "[secret]"
    public static let minimumLength = 8
    /// A base64 form shorter than this is not looked for: it could be part of any base64 text.
    static let minimumBase64Length = 8

    /// Each form to look for, as the Unicode scalars a match must decode to; longest first, so a
    /// longer form wins where two start at the same place.
    private let needles: [[Unicode.Scalar]]
    /// The first byte each needle can start with, for a quick skip of the rest.
    private let startBytes: [Bool]

    /// No secrets: `redacting` returns its text as it is.
    public static let none = SecretRedactor(secrets: [])

    public init(secrets: some Sequence<String>) {
        var forms: Set<String> = []
        for secret in secrets where secret.utf8.count >= Self.minimumLength {
            forms.insert(secret)
            // `Bearer TOKEN`, `token TOKEN`: the token alone is the secret a server echoes.
            if let space = secret.lastIndex(of: " ") {
                let token = String(secret[secret.index(after: space)...])
                if token.utf8.count >= 8 { forms.insert(token) }
                // `Basic BASE64`: a server that decodes it echoes `user:password`, or the password.
                if secret.lowercased().hasPrefix("basic "), let decoded = Self.decodeBase64(token),
                   let credentials = String(validating: decoded, as: UTF8.self) {
                    if credentials.utf8.count >= Self.minimumLength { forms.insert(credentials) }
                    if let colon = credentials.firstIndex(of: ":") {
                        let password = String(credentials[credentials.index(after: colon)...])
                        if password.utf8.count >= Self.minimumLength { forms.insert(password) }
                    }
                }
            }
        }
        for form in Array(forms) {
            for encoded in Self.base64Forms(of: Array(form.utf8)) where encoded.utf8.count >= Self.minimumBase64Length {
                forms.insert(encoded)
            }
        }
        needles = forms.sorted { $0.utf8.count != $1.utf8.count ? $0.utf8.count > $1.utf8.count : $0 < $1 }
            .map { Array($0.unicodeScalars) }
        var starts = [Bool](repeating: false, count: 256)
        if !needles.isEmpty {
            for byte in [UInt8(ascii: "\\"), UInt8(ascii: "%"), UInt8(ascii: "+")] { starts[Int(byte)] = true }
            for needle in needles { starts[Int(Array(String(needle[0]).utf8)[0])] = true }
        }
        startBytes = starts
    }

    public var isEmpty: Bool { needles.isEmpty }

    /// `text` with every form of every secret replaced by `[secret]`.
    public func redacting(_ text: String) -> String {
        guard !needles.isEmpty else { return text }
        let bytes = Array(text.utf8)
        guard let redacted = redacting(bytes) else { return text }
        return String(decoding: redacted, as: UTF8.self)
    }

    /// `text`, the start of a longer text cut off at its end, with every form of every secret
    /// replaced; and a tail that begins a form of a secret (`minimumLength` characters of it or
    /// more, perhaps with an escape the cut split) is taken for that secret and replaced too: a
    /// cut must not leave the first half of a key readable.
    public func redacting(_ text: String, cutAtEnd: Bool) -> String {
        guard !needles.isEmpty else { return text }
        guard let redacted = redacting(Array(text.utf8), cutAtEnd: cutAtEnd) else { return text }
        return String(decoding: redacted, as: UTF8.self)
    }

    /// A message that `…` ends, as a text cut to a limit is written: the part before it
    /// redacted as a cut text; any other text as a whole one.
    public func redactingMessage(_ text: String) -> String {
        guard !needles.isEmpty else { return text }
        let ellipsis = "…"
        guard text.hasSuffix(ellipsis) else { return redacting(text) }
        return redacting(String(text.dropLast()), cutAtEnd: true) + ellipsis
    }

    /// `bytes` with every form of every secret replaced, or nil when none was found.
    public func redacting(_ bytes: [UInt8], cutAtEnd: Bool = false) -> [UInt8]? {
        guard !needles.isEmpty else { return nil }
        var out: [UInt8] = []
        var copiedUpTo = 0
        var index = 0
        while index < bytes.count {
            guard startBytes[Int(bytes[index])] else {
                index += 1
                continue
            }
            var matchedEnd: Int?
            for needle in needles {
                if let end = Self.match(needle, in: bytes, at: index) {
                    matchedEnd = end
                    break
                }
            }
            if matchedEnd == nil, cutAtEnd, needles.contains(where: { Self.beginsAtCut($0, in: bytes, at: index) }) {
                matchedEnd = bytes.count
            }
            if let end = matchedEnd {
                if out.isEmpty { out.reserveCapacity(bytes.count) }
                out.append(contentsOf: bytes[copiedUpTo ..< index])
                out.append(contentsOf: Self.replacement.utf8)
                index = end
                copiedUpTo = end
            } else {
                index += 1
            }
        }
        guard copiedUpTo > 0 else { return nil }
        out.append(contentsOf: bytes[copiedUpTo...])
        return out
    }

    // MARK: - Matching

    /// Where a match of `needle` starting at `start` ends, or nil.
    private static func match(_ needle: [Unicode.Scalar], in bytes: [UInt8], at start: Int) -> Int? {
        var position = start
        for scalar in needle {
            guard let next = matchScalar(scalar, in: bytes, at: position) else { return nil }
            position = next
        }
        return position
    }

    /// Whether the bytes from `start` to the end are the first `minimumLength` or more characters
    /// of `needle` (not all of it), the last perhaps an escape the cut split (`\u00`, `%2`).
    private static func beginsAtCut(_ needle: [Unicode.Scalar], in bytes: [UInt8], at start: Int) -> Bool {
        // The longest a character can be written: a run of backslashes, then a surrogate pair.
        guard bytes.count - start <= needle.count * 32 else { return false }
        var position = start
        var matched = 0
        for scalar in needle {
            guard position < bytes.count else { break }
            guard let next = matchScalar(scalar, in: bytes, at: position) else {
                let rest = bytes[position...]
                let isSplitEscape = rest.count <= 32 && (rest.first == UInt8(ascii: "\\") || rest.first == UInt8(ascii: "%"))
                    && rest.allSatisfy { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "u") || hexDigit($0) }
                guard isSplitEscape else { return false }
                position = bytes.count
                break
            }
            position = next
            matched += 1
        }
        return position == bytes.count && matched >= minimumLength && matched < needle.count
    }

    private static func hexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    /// Where one character of a secret, written in any of the forms the type describes, ends.
    private static func matchScalar(_ scalar: Unicode.Scalar, in bytes: [UInt8], at start: Int) -> Int? {
        if let end = matchPlainOrPercent(scalar, in: bytes, at: start) { return end }
        // A run of backslashes: one JSON escape, or several levels of them.
        var position = start
        while position < bytes.count, bytes[position] == UInt8(ascii: "\\"), position - start < 16 { position += 1 }
        guard position > start, position < bytes.count else { return nil }
        if scalar != "\\", let end = matchPlainOrPercent(scalar, in: bytes, at: position) { return end }
        let letter = bytes[position]
        switch (letter, scalar) {
        case (UInt8(ascii: "n"), "\n"), (UInt8(ascii: "r"), "\r"), (UInt8(ascii: "t"), "\t"),
             (UInt8(ascii: "b"), "\u{08}"), (UInt8(ascii: "f"), "\u{0C}"):
            return position + 1
        case (UInt8(ascii: "u"), _):
            guard let unit = hexValue(bytes, at: position + 1, digits: 4) else { return nil }
            if scalar.value == unit { return position + 5 }
            // A scalar beyond the BMP, as a surrogate pair: `\uD83D\uDE00`.
            guard scalar.value > 0xFFFF, unit == 0xD800 + ((scalar.value - 0x10000) >> 10) else { return nil }
            var low = position + 5
            guard low < bytes.count, bytes[low] == UInt8(ascii: "\\") else { return nil }
            while low < bytes.count, bytes[low] == UInt8(ascii: "\\") { low += 1 }
            guard low < bytes.count, bytes[low] == UInt8(ascii: "u"),
                  let second = hexValue(bytes, at: low + 1, digits: 4), second == 0xDC00 + ((scalar.value - 0x10000) & 0x3FF) else { return nil }
            return low + 5
        default:
            // A backslash in the secret, escaped: the run itself stands for it.
            if scalar == "\\" { return position }
            return nil
        }
    }

    /// The character as its UTF-8 bytes, each plain or `%XX` (either case), or `+` for a space.
    private static func matchPlainOrPercent(_ scalar: Unicode.Scalar, in bytes: [UInt8], at start: Int) -> Int? {
        var position = start
        if scalar == " ", position < bytes.count, bytes[position] == UInt8(ascii: "+") { return position + 1 }
        for byte in String(scalar).utf8 {
            guard position < bytes.count else { return nil }
            if bytes[position] == byte {
                position += 1
            } else if bytes[position] == UInt8(ascii: "%"), let value = hexValue(bytes, at: position + 1, digits: 2), value == UInt32(byte) {
                position += 3
            } else {
                return nil
            }
        }
        return position
    }

    private static func hexValue(_ bytes: [UInt8], at start: Int, digits: Int) -> UInt32? {
        guard start + digits <= bytes.count else { return nil }
        var value: UInt32 = 0
        for byte in bytes[start ..< start + digits] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    // MARK: - Base64

    /// The secret's base64 as it appears whatever precedes it in the encoded text: for each of
    /// the three alignments, the characters that depend on the secret's bytes alone (those
    /// shared with a neighbour byte are left out), in the standard and the URL alphabet; and
    /// the whole padded encoding of the secret alone.
    static func base64Forms(of secret: [UInt8]) -> [String] {
        var forms: [String] = []
        let whole = base64(secret)
        forms.append(whole)
        for offset in 0..<3 {
            let encoded = Array(base64([UInt8](repeating: 0, count: offset) + secret).utf8.filter { $0 != UInt8(ascii: "=") })
            // Characters before `first` hold bits of the bytes before the secret; from `end` on,
            // bits of the bytes after it.
            let first = (offset * 8 + 5) / 6
            let end = ((offset + secret.count) * 8) / 6
            guard end > first else { continue }
            forms.append(String(decoding: encoded[first ..< end], as: UTF8.self))
        }
        return forms.flatMap { [$0, String($0.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }).filter { $0 != "=" }] }
    }

    /// Standard or URL-alphabet base64, padded or not; nil for anything else.
    static func decodeBase64(_ text: String) -> [UInt8]? {
        var bits: UInt32 = 0, count = 0
        var out: [UInt8] = []
        for byte in text.utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"), UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "/"), UInt8(ascii: "_"): value = 63
            case UInt8(ascii: "="): continue
            default: return nil
            }
            bits = bits << 6 | UInt32(value)
            count += 6
            if count >= 8 {
                count -= 8
                out.append(UInt8(truncatingIfNeeded: bits >> UInt32(count)))
            }
        }
        return out.isEmpty ? nil : out
    }

    static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index ..< min(index + 3, bytes.count)]
            var value: UInt32 = 0
            for (position, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * position) }
            for position in 0..<4 {
                out.append(position <= chunk.count ? alphabet[Int((value >> (18 - 6 * position)) & 63)] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
