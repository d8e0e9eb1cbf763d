/// A JSON value: what a protocol line, a log record or an upstream's chunk holds.
/// `JSONScanner` reads it; `write(into:)` writes it as one compact line with sorted keys.
public enum JSON: Sendable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])
}

extension JSON {
    /// Arrays and objects nested deeper than this are refused.
    public static let maxNestingDepth = JSONScanner.maxNestingDepth

    /// Parses one JSON text strictly (see `JSONScanner`).
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSON {
        try JSONScanner.read(bytes) { (scanner) throws(JSONParseError) in try scanner.readValue() }
    }

    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> JSON {
        try JSONScanner.read(bytes) { (scanner) throws(JSONParseError) in try scanner.readValue() }
    }

    public static func parse(_ text: String) throws(JSONParseError) -> JSON {
        try parse(text.utf8)
    }
}

// MARK: - Writing

extension JSON {
    /// Compact UTF-8, keys sorted so equal values always produce equal bytes.
    public func write(into out: inout [UInt8]) { write(into: &out, terminalSafe: false) }

    /// With `terminalSafe`, strings (keys too) are written by `writeTerminalSafeString`.
    private func write(into out: inout [UInt8], terminalSafe: Bool) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): out.append(contentsOf: String(value).utf8)
        case .double(let value):
            if value.isFinite {
                if let integer = JSON.integralValue(value) { out.append(contentsOf: String(integer).utf8) }
                else { out.append(contentsOf: "\(value)".utf8) }
            } else {
                out.append(contentsOf: "null".utf8)
            }
        case .string(let value):
            if terminalSafe { JSON.writeTerminalSafeString(value, into: &out) } else { JSON.writeString(value, into: &out) }
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out, terminalSafe: terminalSafe)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            var first = true
            // The members sorted whole, not their keys then each looked up again: a history page
            // is thousands of objects, and each key was hashed again to find its value.
            for (key, value) in members.sorted(by: { $0.key < $1.key }) {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                if terminalSafe { JSON.writeTerminalSafeString(key, into: &out) } else { JSON.writeString(key, into: &out) }
                out.append(UInt8(ascii: ":"))
                value.write(into: &out, terminalSafe: terminalSafe)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// `string` as a JSON string: `"` and `\\` escaped, `\n` `\r` `\t` as such, other control
    /// characters as `\u00XX`; everything else (non-ASCII included) as it is. Runs that need no
    /// escape are copied whole.
    public static func writeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        if string.utf8.withContiguousStorageIfAvailable({ writeEscaped($0, into: &out) }) == nil {
            writeEscaped(Array(string.utf8), into: &out)
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func writeEscaped(_ text: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        var runStart = 0
        var index = 0
        let count = text.count
        while index < count {
            // Eight bytes at a time past those that need no escape: a history page is
            // megabytes of message text, nearly all of it plain.
            if index + 8 <= count {
                let found = bytesToEscape(text.baseAddress! + index)
                if found == 0 {
                    index += 8
                    continue
                }
                index += found.trailingZeroBitCount >> 3
            }
            let byte = text[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else {
                index += 1
                continue
            }
            defer { index += 1 }
            if runStart < index { out.append(contentsOf: UnsafeBufferPointer(rebasing: text[runStart ..< index])) }
            runStart = index + 1
            out.append(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(byte)
            case 0x0A: out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "t"))
            default:
                let hex: StaticString = "0123456789abcdef"
                out.append(UInt8(ascii: "u"))
                out.append(UInt8(ascii: "0"))
                out.append(UInt8(ascii: "0"))
                out.append(hex.utf8Start[Int(byte >> 4)])
                out.append(hex.utf8Start[Int(byte & 15)])
            }
        }
        if runStart < text.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: text[runStart...])) }
    }

    /// The 8 bytes at `start`, tested at once for a control character, a quote or a backslash
    /// (non-ASCII bytes need no escape). Zero when there is none; else the lowest set bit is
    /// in the (little-endian) first such byte. `(x - 0x01…) & ~x & 0x80…` sets a byte's high bit
    /// where that byte of `x` is zero, and its borrows only run upward from a true find, so a
    /// false find can only come after a true one (the caller checks the byte it lands on).
    @inline(__always)
    private static func bytesToEscape(_ start: UnsafePointer<UInt8>) -> UInt64 {
        let word = UInt64(littleEndian: UnsafeRawPointer(start).loadUnaligned(as: UInt64.self))
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quotes = word ^ (ones &* 0x22), backslashes = word ^ (ones &* 0x5C)
        let controls = (word &- ones &* 0x20) & ~word
        return (controls | ((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes)) & (ones &* 0x80)
    }

    private static func writeEscaped(_ text: [UInt8], into out: inout [UInt8]) {
        text.withUnsafeBufferPointer { writeEscaped($0, into: &out) }
    }

    /// About how many bytes `write(into:)` writes: exact for plain text, numbers counted at
    /// their usual width, escapes not counted. For sizing a buffer once.
    public var writtenSizeEstimate: Int {
        switch self {
        case .null, .bool: 5
        case .int, .double: 12
        case .string(let value): value.utf8.count + 2
        case .array(let items): items.reduce(2) { $0 + $1.writtenSizeEstimate + 1 }
        case .object(let members): members.reduce(2) { $0 + $1.key.utf8.count + 4 + $1.value.writtenSizeEstimate }
        }
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = []
        write(into: &out)
        return out
    }

    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// The same JSON as `text`, with every character a terminal would act on or that changes
    /// how the text around it reads escaped as `\uXXXX`: C0 controls (line feed, carriage
    /// return and tab as `\n`, `\r`, `\t`), DEL, C1 controls (U+0080–U+009F, U+009B among
    /// them: a one-byte CSI to some terminals), the line and paragraph separators and the
    /// bidirectional controls. For what the client prints (`--json`); the wire keeps `text`.
    public var terminalSafeText: String {
        var out: [UInt8] = []
        write(into: &out, terminalSafe: true)
        return String(decoding: out, as: UTF8.self)
    }

    /// JSON text as `terminalSafeText` would write the value it holds, without building the
    /// value: what `write(into:)` wrote (compact, keys sorted) comes out byte for byte as the
    /// value's `terminalSafeText`. `encoded` must be JSON text a `JSONScanner` accepted (so its
    /// UTF-8 is valid and raw control bytes can only be white space between tokens). For any
    /// such text the result is one line a terminal cannot act on: tab, CR and LF between tokens
    /// are dropped, and every scalar `escapesForTerminal` names, which can only be in a string,
    /// is written `\uXXXX` (none is above U+FFFF).
    public static func writeTerminalSafe(encoded: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        var run = 0
        var index = 0
        let count = encoded.count
        // Room for the text at least, grown as appending would grow it: a bare reserve of
        // `out.count + count` reallocates to exactly that, so a page written message by message into
        // one buffer was copied whole for every message.
        if out.capacity < out.count + count { out.reserveCapacity(max(out.count + count, 2 * out.capacity)) }
        func flush(to end: Int) {
            if run < end { out.append(contentsOf: UnsafeBufferPointer(rebasing: encoded[run..<end])) }
        }
        while index < count {
            let byte = encoded[index]
            if byte >= 0x20, byte < 0x7F {
                index += 1
                continue
            }
            if byte < 0x80 {
                // DEL (in a string) is escaped; white space between tokens is dropped.
                flush(to: index)
                if byte == 0x7F { writeHexEscape(0x7F, into: &out) }
                index += 1
                run = index
                continue
            }
            let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2
            guard index + length <= count else { break }
            var value = UInt32(byte) & (0x7F >> UInt32(length))
            for next in encoded[(index + 1)..<(index + length)] { value = value << 6 | UInt32(next & 0x3F) }
            if let scalar = Unicode.Scalar(value), escapesForTerminal(scalar) {
                flush(to: index)
                writeHexEscape(value, into: &out)
                run = index + length
            }
            index += length
        }
        flush(to: count)
    }

    /// `\uXXXX`, lowercase, as both writers spell an escape.
    private static func writeHexEscape(_ value: UInt32, into out: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"
        let value = Int(value)
        hex.withUTF8Buffer { hex in
            out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"),
                                    hex[(value >> 12) & 15], hex[(value >> 8) & 15], hex[(value >> 4) & 15], hex[value & 15]])
        }
    }

    /// Whether `scalar` is written as `\uXXXX` by `terminalSafeText`.
    public static func escapesForTerminal(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F...0x9F, 0x2028, 0x2029, 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    private static func writeTerminalSafeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var string = string
        // Runs of bytes that stand for themselves (printable ASCII but `"` and `\\`) are copied
        // whole; anything else is looked at scalar by scalar. A history page is megabytes of text.
        string.withUTF8 { bytes in
            var run = 0
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                if byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
                    index += 1
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<index]))
                let length = byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2
                var value = length == 1 ? UInt32(byte) : UInt32(byte) & (0x7F >> UInt32(length))
                for next in bytes[(index + 1)..<(index + length)] { value = value << 6 | UInt32(next & 0x3F) }
                writeTerminalSafe(Unicode.Scalar(value)!, bytes: UnsafeBufferPointer(rebasing: bytes[index..<(index + length)]), into: &out)
                index += length
                run = index
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<bytes.count]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// One scalar of a string written terminal-safe; `bytes` is its UTF-8.
    private static func writeTerminalSafe(_ scalar: Unicode.Scalar, bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        switch scalar {
        case "\"": out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
        case "\\": out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case "\n": out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case "\r": out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        case "\t": out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        default:
            if escapesForTerminal(scalar) {
                writeHexEscape(scalar.value, into: &out)
            } else {
                out.append(contentsOf: bytes)
            }
        }
    }
}

extension JSON: Equatable {
    /// The same JSON value: numbers compare by value, so `.int(3)` equals `.double(3.0)` (both
    /// are written `3`; JSON has one number type).
    public static func == (left: JSON, right: JSON) -> Bool {
        switch (left, right) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.int(a), .int(b)): a == b
        case let (.double(a), .double(b)): a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): integralValue(b) == a
        case let (.string(a), .string(b)): a == b
        case let (.array(a), .array(b)): a == b
        case let (.object(a), .object(b)): a == b
        default: false
        }
    }

    /// `value` as an Int when it is integral and in range.
    static func integralValue(_ value: Double) -> Int? {
        guard value == value.rounded(.towardZero), value >= -0x1p63, value < 0x1p63 else { return nil }
        return Int(value)
    }
}

// MARK: - Reading values

extension JSON {
    public subscript(key: String) -> JSON? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var string: String? { if case .string(let v) = self { return v }; return nil }
    public var bool: Bool? { if case .bool(let v) = self { return v }; return nil }
    public var object: [String: JSON]? { if case .object(let v) = self { return v }; return nil }
    public var array: [JSON]? { if case .array(let v) = self { return v }; return nil }
    public var isNull: Bool { if case .null = self { return true }; return false }

    /// Integers, and doubles with no fractional part that fit.
    public var int: Int? {
        switch self {
        case .int(let v): return v
        case .double(let v) where v == v.rounded() && abs(v) < 9.0e15: return Int(v)
        default: return nil
        }
    }

    public var double: Double? {
        switch self {
        case .int(let v): return Double(v)
        case .double(let v): return v
        default: return nil
        }
    }

    /// The JSON type's name, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSON {
    /// `.string(value)` or `.null`; handy for optional fields.
    public static func optional(_ value: String?) -> JSON { value.map(JSON.string) ?? .null }
}
