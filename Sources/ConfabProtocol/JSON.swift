import FoundationEssentials

/// A JSON value. Parsing goes through Foundation's decoder; writing is done here because
/// it is small, hot (every streamed token is written once) and must be one compact line.
public enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])
}

public struct JSONParseError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

extension JSON: Decodable {
    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var items: [JSON] = []
            if let count = array.count { items.reserveCapacity(count) }
            while !array.isAtEnd { items.append(try array.decode(JSON.self)) }
            self = .array(items)
            return
        }
        if let object = try? decoder.container(keyedBy: AnyKey.self) {
            var members: [String: JSON] = [:]
            members.reserveCapacity(object.allKeys.count)
            for key in object.allKeys { members[key.stringValue] = try object.decode(JSON.self, forKey: key) }
            self = .object(members)
            return
        }
        let value = try decoder.singleValueContainer()
        if value.decodeNil() { self = .null }
        else if let string = try? value.decode(String.self) { self = .string(string) }
        else if let bool = try? value.decode(Bool.self) { self = .bool(bool) }
        else if let int = try? value.decode(Int.self) { self = .int(int) }
        else if let double = try? value.decode(Double.self) { self = .double(double) }
        else {
            // Foundation reads leaves lazily, so a bad escape, a lone surrogate, a leading zero
            // or a number past Double's range only shows here; its own error has no public text.
            throw DecodingError.dataCorruptedError(
                in: value, debugDescription: "unreadable value at \(Self.path(decoder.codingPath)) (a bad escape or surrogate, or a malformed or out-of-range number)")
        }
    }

    /// `params.items[2]`, as a reader of the offending line would point at it.
    private static func path(_ codingPath: [any CodingKey]) -> String {
        guard !codingPath.isEmpty else { return "the top level" }
        var text = ""
        for key in codingPath {
            if let index = key.intValue { text += "[\(index)]" } else { text += (text.isEmpty ? "" : ".") + key.stringValue }
        }
        return text
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Parses one JSON text. Invalid UTF-8 is rejected before Foundation sees it.
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSON {
        let data = Data(bytes)
        guard String(validating: data, as: UTF8.self) != nil else {
            throw JSONParseError(description: "invalid UTF-8")
        }
        // Foundation's decoder takes `[1,]` as a convenience; RFC 8259 does not.
        if let offset = trailingCommaOffset(data) {
            throw JSONParseError(description: "invalid JSON: trailing comma at byte \(offset)")
        }
        if nestsTooDeep(data) {
            throw JSONParseError(description: "invalid JSON: nested deeper than \(maxNestingDepth) levels")
        }
        do {
            return try JSONDecoder().decode(JSON.self, from: data)
        } catch let error as DecodingError {
            throw JSONParseError(description: Self.describe(error))
        } catch {
            throw JSONParseError(description: "invalid JSON")
        }
    }

    /// Offset of a comma followed (after white space) by `]` or `}`, outside strings.
    static func trailingCommaOffset(_ bytes: Data) -> Int? {
        var inString = false, escaped = false
        var lastComma: Int?
        for (offset, byte) in bytes.enumerated() {
            if inString {
                if escaped { escaped = false } else if byte == 0x5C { escaped = true } else if byte == 0x22 { inString = false }
                continue
            }
            switch byte {
            case 0x22: inString = true; lastComma = nil
            case 0x2C: lastComma = offset
            case 0x5D, 0x7D: if let comma = lastComma { return comma }
            case 0x20, 0x09, 0x0A, 0x0D: break
            default: lastComma = nil
            }
        }
        return nil
    }

    /// Foundation's decoder refuses arrays and objects nested deeper than this.
    public static let maxNestingDepth = 512

    /// Whether arrays and objects nest deeper than `maxNestingDepth` (brackets in strings do
    /// not count). Check this before any `JSONDecoder` sees untrusted bytes: Foundation's
    /// scanner traps, killing the process, instead of throwing when the bracket one level too
    /// deep is the last byte of its input (`[` × 513; found by scripts/fuzz-socket.py).
    public static func nestsTooDeep(_ bytes: some Sequence<UInt8>) -> Bool {
        var depth = 0
        var inString = false, escaped = false
        for byte in bytes {
            if inString {
                if escaped { escaped = false } else if byte == 0x5C { escaped = true } else if byte == 0x22 { inString = false }
                continue
            }
            switch byte {
            case 0x22: inString = true
            case 0x5B, 0x7B:
                depth += 1
                if depth > maxNestingDepth { return true }
            case 0x5D, 0x7D: depth -= 1
            default: break
            }
        }
        return false
    }

    public static func parse(_ text: String) throws(JSONParseError) -> JSON {
        try parse(Array(text.utf8))
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let context):
            if let underlying = context.underlyingError {
                let text = "\(underlying)"
                if text.count < 200, !text.isEmpty { return "invalid JSON: \(text)" }
            }
            return "invalid JSON: \(context.debugDescription)"
        default:
            return "invalid JSON"
        }
    }
}

// MARK: - Writing

extension JSON {
    /// Compact UTF-8, keys sorted so equal values always produce equal bytes.
    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): out.append(contentsOf: String(value).utf8)
        case .double(let value):
            if value.isFinite {
                if value == value.rounded(), abs(value) < 1e15 { out.append(contentsOf: String(Int(value)).utf8) }
                else { out.append(contentsOf: "\(value)".utf8) }
            } else {
                out.append(contentsOf: "null".utf8)
            }
        case .string(let value): JSON.writeString(value, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            var first = true
            for key in members.keys.sorted() {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                JSON.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                members[key]!.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): out.append(contentsOf: [92, 92])
            case 0x0A: out.append(contentsOf: [92, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [92, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [92, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [92, UInt8(ascii: "u"), 48, 48, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = []
        write(into: &out)
        return out
    }

    public var text: String { String(decoding: bytes, as: UTF8.self) }
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
