// A small order-preserving JSON value with a strict parser and a compact encoder.
// Numbers keep their original text so that logged request bodies round-trip exactly.

enum JSON: Sendable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    /// The value of `key` in an object (the last one if the key is repeated).
    subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.0 == key })?.1
    }

    var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    var arrayValue: [JSON]? {
        if case .array(let a) = self { return a }
        return nil
    }

    var isObject: Bool {
        if case .object = self { return true }
        return false
    }

    static func int(_ value: Int) -> JSON { .number(String(value)) }

    // MARK: Encoding

    func encoded() -> String {
        var out = ""
        encode(into: &out)
        return out
    }

    func encode(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += n
        case .string(let s): JSON.encodeString(s, into: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.encode(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out += "," }
                JSON.encodeString(key, into: &out)
                out += ":"
                value.encode(into: &out)
            }
            out += "}"
        }
    }

    static func encodeString(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    // MARK: Parsing

    struct ParseError: Error, Sendable {
        let message: String
        let offset: Int
    }

    static func parse(_ bytes: [UInt8]) throws(ParseError) -> JSON {
        var parser = JSONParser(bytes: bytes)
        return try parser.parseDocument()
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var pos = 0
    var depth = 0
    static let maxDepth = 256

    init(bytes: [UInt8]) { self.bytes = bytes }

    func fail(_ message: String) -> JSON.ParseError {
        JSON.ParseError(message: message, offset: pos)
    }

    mutating func skipWhitespace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D: pos += 1
            default: return
            }
        }
    }

    mutating func parseDocument() throws(JSON.ParseError) -> JSON {
        // Tolerate a UTF-8 byte order mark.
        if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { pos = 3 }
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard pos == bytes.count else { throw fail("trailing characters after JSON value") }
        return value
    }

    mutating func parseValue() throws(JSON.ParseError) -> JSON {
        guard pos < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[pos] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSON.ParseError) {
        let count = literal.utf8CodeUnitCount
        guard pos + count <= bytes.count else { throw fail("unexpected end of input") }
        let start = literal.utf8Start
        for i in 0..<count where bytes[pos + i] != start[i] {
            throw fail("invalid literal")
        }
        pos += count
    }

    mutating func enter() throws(JSON.ParseError) {
        depth += 1
        if depth > JSONParser.maxDepth { throw fail("nesting too deep") }
    }

    mutating func parseObject() throws(JSON.ParseError) -> JSON {
        try enter()
        defer { depth -= 1 }
        pos += 1
        var members: [(String, JSON)] = []
        skipWhitespace()
        if pos < bytes.count && bytes[pos] == UInt8(ascii: "}") {
            pos += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard pos < bytes.count, bytes[pos] == UInt8(ascii: "\"") else { throw fail("expected object key") }
            let key = try parseString()
            skipWhitespace()
            guard pos < bytes.count, bytes[pos] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            pos += 1
            skipWhitespace()
            let value = try parseValue()
            members.append((key, value))
            skipWhitespace()
            guard pos < bytes.count else { throw fail("unexpected end of input") }
            if bytes[pos] == UInt8(ascii: ",") { pos += 1; continue }
            if bytes[pos] == UInt8(ascii: "}") { pos += 1; return .object(members) }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray() throws(JSON.ParseError) -> JSON {
        try enter()
        defer { depth -= 1 }
        pos += 1
        var items: [JSON] = []
        skipWhitespace()
        if pos < bytes.count && bytes[pos] == UInt8(ascii: "]") {
            pos += 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try parseValue())
            skipWhitespace()
            guard pos < bytes.count else { throw fail("unexpected end of input") }
            if bytes[pos] == UInt8(ascii: ",") { pos += 1; continue }
            if bytes[pos] == UInt8(ascii: "]") { pos += 1; return .array(items) }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseNumber() throws(JSON.ParseError) -> JSON {
        let start = pos
        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        if bytes[pos] == UInt8(ascii: "-") { pos += 1 }
        guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("invalid number") }
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
        } else {
            while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count && bytes[pos] == UInt8(ascii: ".") {
            pos += 1
            guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("invalid number") }
            while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count && (bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E")) {
            pos += 1
            if pos < bytes.count && (bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-")) { pos += 1 }
            guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("invalid number") }
            while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
        }
        return .number(String(decoding: bytes[start..<pos], as: UTF8.self))
    }

    mutating func parseHex4() throws(JSON.ParseError) -> UInt32 {
        guard pos + 4 <= bytes.count else { throw fail("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[pos]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw fail("invalid \\u escape")
            }
            value = value * 16 + digit
            pos += 1
        }
        return value
    }

    mutating func parseString() throws(JSON.ParseError) -> String {
        pos += 1  // opening quote
        var out: [UInt8] = []
        while true {
            guard pos < bytes.count else { throw fail("unterminated string") }
            let b = bytes[pos]
            if b == UInt8(ascii: "\"") {
                pos += 1
                break
            }
            if b < 0x20 { throw fail("control character in string") }
            if b != UInt8(ascii: "\\") {
                out.append(b)
                pos += 1
                continue
            }
            pos += 1
            guard pos < bytes.count else { throw fail("unterminated string") }
            let e = bytes[pos]
            pos += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var code = try parseHex4()
                if code >= 0xD800 && code < 0xDC00 {
                    // High surrogate: combine with a following low surrogate if there is one.
                    if pos + 6 <= bytes.count && bytes[pos] == UInt8(ascii: "\\") && bytes[pos + 1] == UInt8(ascii: "u") {
                        let save = pos
                        pos += 2
                        let low = try parseHex4()
                        if low >= 0xDC00 && low < 0xE000 {
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            pos = save
                            code = 0xFFFD
                        }
                    } else {
                        code = 0xFFFD
                    }
                } else if code >= 0xDC00 && code < 0xE000 {
                    code = 0xFFFD
                }
                let scalar = Unicode.Scalar(code) ?? "\u{FFFD}"
                out.append(contentsOf: Array(String(Character(scalar)).utf8))
            default:
                throw fail("invalid escape")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8 in string") }
        return s
    }
}
