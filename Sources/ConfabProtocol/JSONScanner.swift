#if canImport(Glibc)
import Glibc
#endif

/// Why a JSON text was refused, and where.
public struct JSONParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong, without the position: "trailing comma", "lone surrogate \ud800", …
    public let reason: String
    /// Byte offset in the text where the problem is.
    public let offset: Int
    /// For a malformed string or number: where the value sits, as `params.items[1]` ("" at the
    /// top level). Nil for a structural error (a missing bracket, a trailing comma, …).
    public internal(set) var path: String?

    @usableFromInline
    init(_ reason: String, at offset: Int, inValue: Bool = false) {
        self.reason = reason
        self.offset = offset
        self.path = inValue ? "" : nil
    }

    public var description: String {
        guard let path else { return "invalid JSON: \(reason) at byte \(offset)" }
        return "invalid JSON: unreadable value at \(path.isEmpty ? "the top level" : path) (\(reason)) at byte \(offset)"
    }

    /// The same error seen from the container that holds the value at `key`.
    func inside(key: String) -> JSONParseError {
        guard let path else { return self }
        var outer = self
        outer.path = path.isEmpty || path.first == "[" ? key + path : key + "." + path
        return outer
    }

    func inside(index: Int) -> JSONParseError {
        guard let path else { return self }
        var outer = self
        outer.path = "[\(index)]" + (path.isEmpty || path.first == "[" ? path : "." + path)
        return outer
    }
}

/// What the next value is, from its first byte.
public enum JSONKind: Sendable {
    case object, array, string, number, bool, null
}

/// A strict reader of one JSON text (RFC 8259) held in contiguous bytes.
///
/// It is one pass over the bytes, with no copy of them: it checks UTF-8, escapes, surrogate
/// pairs, numbers and nesting as it goes, so no separate pre-scan is needed. Values can be
/// built (`readValue()` gives a `JSON` tree) or walked member by member, so that a caller that
/// needs three fields of a big object builds nothing for the rest (`members`, `readString`, …).
/// Anything a walker does not read is still checked: `members`/`elements` skip, and so
/// validate, every value the body leaves unread.
///
/// Refused: trailing commas, leading zeros, `NaN`, comments, a byte order mark, raw control
/// characters and invalid UTF-8 in strings (overlong forms and encoded surrogates included),
/// lone surrogate escapes, numbers beyond Double's range, nesting deeper than
/// `maxNestingDepth`, and anything after the value but white space.
/// Duplicate keys are all checked; when building an object the first one wins.
public struct JSONScanner {
    /// Arrays and objects nested deeper than this are refused (Foundation's limit, which this
    /// replaced, so nothing it accepted is refused now).
    public static let maxNestingDepth = 512

    @usableFromInline let bytes: UnsafeBufferPointer<UInt8>
    /// Where the next unread byte is.
    public private(set) var offset = 0
    private var depth = 0

    @usableFromInline
    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Runs `body` over the JSON text in `bytes`; after it, only white space may be left.
    /// (Inlinable, so a caller in another module gets it specialised for its `Value`.)
    @inlinable
    public static func read<Value>(
        _ bytes: UnsafeBufferPointer<UInt8>, _ body: (inout JSONScanner) throws(JSONParseError) -> Value
    ) throws(JSONParseError) -> Value {
        var scanner = JSONScanner(bytes)
        let value = try body(&scanner)
        scanner.skipWhiteSpace()
        guard scanner.offset == bytes.count else { throw JSONParseError("unexpected text after the value", at: scanner.offset) }
        return value
    }

    /// The same over any bytes; contiguous ones (arrays, native strings' UTF-8) are not copied.
    @inlinable
    public static func read<Value>(
        _ bytes: some Collection<UInt8>, _ body: (inout JSONScanner) throws(JSONParseError) -> Value
    ) throws(JSONParseError) -> Value {
        let result = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(JSONParseError) -> Value in try read(buffer, body) }
        }
        if let result { return try result.get() }
        return try Array(bytes).withUnsafeBufferPointer { buffer in
            Result { () throws(JSONParseError) -> Value in try read(buffer, body) }
        }.get()
    }

    // MARK: - Looking

    /// The kind of the next value (white space before it is skipped).
    public mutating func kind() throws(JSONParseError) -> JSONKind {
        skipWhiteSpace()
        guard offset < bytes.count else { throw JSONParseError("unexpected end of input", at: offset) }
        switch bytes[offset] {
        case .openBrace: return .object
        case .openBracket: return .array
        case .quote: return .string
        case .minus, .zero ... .nine: return .number
        case .t, .f: return .bool
        case .n: return .null
        case let byte: throw JSONParseError("unexpected \(Self.show(byte))", at: offset)
        }
    }

    // MARK: - Reading values

    /// The next value as a tree.
    public mutating func readValue() throws(JSONParseError) -> JSON {
        switch try kind() {
        case .object:
            // Collected first, so the dictionary is hashed once per key at its final size.
            var members: [(String, JSON)] = []
            try self.members { (key, scanner) throws(JSONParseError) in members.append((key.string, try scanner.readValue())) }
            return .object(Dictionary(members, uniquingKeysWith: { first, _ in first }))
        case .array:
            var array: [JSON] = []
            try elements { (_, scanner) throws(JSONParseError) in array.append(try scanner.readValue()) }
            return .array(array)
        case .string: return .string(try scanString().string(in: bytes))
        case .number: return try readNumber()
        case .bool: return .bool(try readLiteral())
        case .null:
            _ = try readLiteral()
            return .null
        }
    }

    /// The next value if it is a string; otherwise nil, and the value is skipped.
    public mutating func readString() throws(JSONParseError) -> String? {
        guard try kind() == .string else {
            try skipValue()
            return nil
        }
        return try scanString().string(in: bytes)
    }

    /// The next value if it is a number with an integral value that fits an `Int` (as
    /// `JSON.int` reads it); otherwise nil, and the value is skipped.
    public mutating func readInt() throws(JSONParseError) -> Int? {
        guard try kind() == .number else {
            try skipValue()
            return nil
        }
        return try readNumber().int
    }

    /// Whether the next value is a string equal to `text`; the value is read either way.
    /// Builds no string unless the value holds escapes.
    public mutating func readString(equalTo text: StaticString) throws(JSONParseError) -> Bool {
        guard try kind() == .string else {
            try skipValue()
            return false
        }
        return try scanString().equals(text, in: bytes)
    }

    /// Consumes the next value if it is `null`.
    public mutating func readNull() throws(JSONParseError) -> Bool {
        guard try kind() == .null else { return false }
        _ = try readLiteral()
        return true
    }

    /// Reads past the next value, checking it as strictly as `readValue` would.
    public mutating func skipValue() throws(JSONParseError) {
        switch try kind() {
        case .object: try members { (_, scanner) throws(JSONParseError) in try scanner.skipValue() }
        case .array: try elements { (_, scanner) throws(JSONParseError) in try scanner.skipValue() }
        case .string: _ = try scanString()
        case .number: _ = try scanNumber()
        case .bool, .null: _ = try readLiteral()
        }
    }

    /// Calls `body` with each member's key and the scanner placed on its value; a value the
    /// body does not read is skipped. The next value must be an object (see `kind()`).
    public mutating func members(
        _ body: (JSONKey, inout JSONScanner) throws(JSONParseError) -> Void
    ) throws(JSONParseError) {
        guard try kind() == .object else { throw JSONParseError("expected an object", at: offset) }
        try enter()
        offset += 1
        skipWhiteSpace()
        if offset < bytes.count, bytes[offset] == .closeBrace {
            offset += 1
            depth -= 1
            return
        }
        while true {
            skipWhiteSpace()
            guard offset < bytes.count else { throw JSONParseError("unexpected end of input in an object", at: offset) }
            guard bytes[offset] == .quote else {
                throw JSONParseError(bytes[offset] == .closeBrace ? "trailing comma" : "expected a key in quotes", at: offset)
            }
            let keyToken: StringToken
            do throws(JSONParseError) { keyToken = try scanString() } catch { throw error.inside(key: "(a key)") }
            skipWhiteSpace()
            guard offset < bytes.count, bytes[offset] == .colon else { throw JSONParseError("expected ':' after a key", at: offset) }
            offset += 1
            skipWhiteSpace()
            let valueStart = offset
            let key = JSONKey(token: keyToken, bytes: bytes)
            do throws(JSONParseError) {
                try body(key, &self)
                if offset == valueStart { try skipValue() }
            } catch {
                throw error.inside(key: key.string)
            }
            skipWhiteSpace()
            guard offset < bytes.count else { throw JSONParseError("unexpected end of input in an object", at: offset) }
            switch bytes[offset] {
            case .comma: offset += 1
            case .closeBrace:
                offset += 1
                depth -= 1
                return
            default: throw JSONParseError("expected ',' or '}'", at: offset)
            }
        }
    }

    /// Calls `body` with each element's index and the scanner placed on it; an element the
    /// body does not read is skipped. The next value must be an array (see `kind()`).
    public mutating func elements(
        _ body: (Int, inout JSONScanner) throws(JSONParseError) -> Void
    ) throws(JSONParseError) {
        guard try kind() == .array else { throw JSONParseError("expected an array", at: offset) }
        try enter()
        offset += 1
        skipWhiteSpace()
        if offset < bytes.count, bytes[offset] == .closeBracket {
            offset += 1
            depth -= 1
            return
        }
        var index = 0
        while true {
            skipWhiteSpace()
            if offset < bytes.count, bytes[offset] == .closeBracket, index > 0 {
                throw JSONParseError("trailing comma", at: offset)
            }
            let valueStart = offset
            do throws(JSONParseError) {
                try body(index, &self)
                if offset == valueStart { try skipValue() }
            } catch {
                throw error.inside(index: index)
            }
            index += 1
            skipWhiteSpace()
            guard offset < bytes.count else { throw JSONParseError("unexpected end of input in an array", at: offset) }
            switch bytes[offset] {
            case .comma: offset += 1
            case .closeBracket:
                offset += 1
                depth -= 1
                return
            default: throw JSONParseError("expected ',' or ']'", at: offset)
            }
        }
    }

    // MARK: - Tokens

    private mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > Self.maxNestingDepth {
            throw JSONParseError("nested deeper than \(Self.maxNestingDepth) levels", at: offset)
        }
    }

    @usableFromInline
    mutating func skipWhiteSpace() {
        while offset < bytes.count {
            switch bytes[offset] {
            case .space, .tab, .lineFeed, .carriageReturn: offset += 1
            default: return
            }
        }
    }

    /// `true`, `false` or `null`, at `offset`; the Bool is which of true/false it was.
    private mutating func readLiteral() throws(JSONParseError) -> Bool {
        let (word, value): (StaticString, Bool) =
            switch bytes[offset] {
            case .t: ("true", true)
            case .f: ("false", false)
            default: ("null", false)
            }
        let count = word.utf8CodeUnitCount
        guard offset + count <= bytes.count,
              UnsafeBufferPointer(start: word.utf8Start, count: count).elementsEqual(bytes[offset ..< offset + count])
        else { throw JSONParseError("unexpected \(Self.show(bytes[offset]))", at: offset) }
        offset += count
        // `truex` or `null1` is one bad token, not a value and then garbage.
        if offset < bytes.count, bytes[offset].isLetterOrDigit {
            throw JSONParseError("unexpected \(Self.show(bytes[offset]))", at: offset)
        }
        return value
    }

    /// A string's bytes between its quotes; `offset` is on the opening quote, and ends after
    /// the closing one. Checks UTF-8, control characters and escapes.
    private mutating func scanString() throws(JSONParseError) -> StringToken {
        let start = offset + 1
        var index = start
        var hasEscapes = false
        let end = bytes.count
        while true {
            if index + 8 <= end {
                let special = Self.specialBytes(bytes.baseAddress! + index)
                guard special != 0 else {
                    index += 8
                    continue
                }
                index += special.trailingZeroBitCount >> 3
            }
            guard index < end else { throw JSONParseError("unterminated string", at: offset) }
            let byte = bytes[index]
            if byte == .quote { break }
            if byte < 0x80 {
                if byte == .backslash {
                    hasEscapes = true
                    index = try scanEscape(at: index)
                } else if byte < 0x20 {
                    throw JSONParseError("control character \(Self.show(byte)) in a string", at: index, inValue: true)
                } else {
                    index += 1
                }
            } else {
                index = try scanUTF8(at: index)
            }
        }
        offset = index + 1
        return StringToken(start: start, end: index, hasEscapes: hasEscapes)
    }

    /// The 8 bytes at `start`, tested at once for what a string cannot hold as it is: a quote,
    /// a backslash, a control character or a non-ASCII byte. Zero when there is none; else the
    /// lowest set bit is in the (little-endian) first such byte. A subtraction sets a byte's
    /// high bit where that byte is under the subtrahend, or where a borrow from a lower byte
    /// reaches it; a borrow only starts at a true find, so false ones only come after it.
    @inline(__always)
    private static func specialBytes(_ start: UnsafePointer<UInt8>) -> UInt64 {
        let word = UInt64(littleEndian: UnsafeRawPointer(start).loadUnaligned(as: UInt64.self))
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quotes = word ^ (ones &* UInt64(UInt8.quote)), backslashes = word ^ (ones &* UInt64(UInt8.backslash))
        return (word | (word &- ones &* 0x20) | (quotes &- ones) | (backslashes &- ones)) & (ones &* 0x80)
    }

    /// Checks one escape at `index` (the backslash); returns the index after it.
    private func scanEscape(at index: Int) throws(JSONParseError) -> Int {
        guard index + 1 < bytes.count else { throw JSONParseError("unterminated string", at: index) }
        switch bytes[index + 1] {
        case .quote, .backslash, .slash, .b, .f, .n, .r, .t: return index + 2
        case .u:
            let code = try hex4(at: index + 2)
            switch code {
            case 0xD800 ..< 0xDC00:
                guard index + 7 < bytes.count, bytes[index + 6] == .backslash, bytes[index + 7] == .u,
                      case 0xDC00 ..< 0xE000 = try hex4(at: index + 8)
                else { throw JSONParseError("lone surrogate \\u\(Self.hex(code))", at: index, inValue: true) }
                return index + 12
            case 0xDC00 ..< 0xE000:
                throw JSONParseError("lone surrogate \\u\(Self.hex(code))", at: index, inValue: true)
            default:
                return index + 6
            }
        case let byte:
            throw JSONParseError("invalid escape \\\(Self.show(byte, quoted: false))", at: index, inValue: true)
        }
    }

    private func hex4(at index: Int) throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw JSONParseError("truncated \\u escape", at: index - 2, inValue: true) }
        var value: UInt32 = 0
        for position in index ..< index + 4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case .zero ... .nine: digit = byte - .zero
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A") ... UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw JSONParseError("invalid \\u escape", at: index - 2, inValue: true)
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// Checks one multi-byte UTF-8 sequence at `index` (Unicode's table 3-7: no overlong forms,
    /// no surrogates, nothing past U+10FFFF); returns the index after it.
    private func scanUTF8(at index: Int) throws(JSONParseError) -> Int {
        let lead = bytes[index]
        let length: Int
        var low: UInt8 = 0x80, high: UInt8 = 0xBF  // the range of the second byte
        switch lead {
        case 0xC2 ... 0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1 ... 0xEC, 0xEE ... 0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1 ... 0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: throw JSONParseError("invalid UTF-8", at: index, inValue: true)
        }
        guard index + length <= bytes.count, (low ... high).contains(bytes[index + 1]) else {
            throw JSONParseError("invalid UTF-8", at: index, inValue: true)
        }
        for position in index + 2 ..< index + length where bytes[position] & 0xC0 != 0x80 {
            throw JSONParseError("invalid UTF-8", at: index, inValue: true)
        }
        return index + length
    }

    /// A number at `offset`, by RFC 8259's grammar; `offset` ends after it.
    private mutating func scanNumber() throws(JSONParseError) -> (start: Int, end: Int, isInteger: Bool) {
        let start = offset
        var index = offset
        let end = bytes.count
        func isDigit(_ index: Int) -> Bool { index < end && (UInt8.zero ... UInt8.nine).contains(bytes[index]) }
        if bytes[index] == .minus { index += 1 }
        guard isDigit(index) else { throw JSONParseError("a number without digits", at: start, inValue: true) }
        if bytes[index] == .zero {
            index += 1
            if isDigit(index) { throw JSONParseError("a number with a leading zero", at: start, inValue: true) }
        } else {
            while isDigit(index) { index += 1 }
        }
        var isInteger = true
        if index < end, bytes[index] == .dot {
            index += 1
            guard isDigit(index) else { throw JSONParseError("no digit after a decimal point", at: start, inValue: true) }
            while isDigit(index) { index += 1 }
            isInteger = false
        }
        if index < end, bytes[index] | 0x20 == .e {
            index += 1
            if index < end, bytes[index] == .plus || bytes[index] == .minus { index += 1 }
            guard isDigit(index) else { throw JSONParseError("no digit in an exponent", at: start, inValue: true) }
            while isDigit(index) { index += 1 }
            isInteger = false
        }
        if index < end, bytes[index].isLetterOrDigit || bytes[index] == .dot {
            throw JSONParseError("a malformed number", at: start, inValue: true)
        }
        offset = index
        return (start, index, isInteger)
    }

    /// A number whose exact value is an integer that fits an `Int` is an `.int`, however it is
    /// written (`12`, `1.2e1`, `1e18`), as Foundation read them; anything else is the nearest
    /// Double, even when that is integral (`1.0000000000000001`, `-9223372036854775809`): such
    /// a number is not an Int, and `RPC.classify` decides what an id may round to.
    private mutating func readNumber() throws(JSONParseError) -> JSON {
        let (start, end, isInteger) = try scanNumber()
        if let exact = isInteger ? integer(start, end) : integralValue(start, end) { return .int(exact) }
        guard let double = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start ..< end]), as: UTF8.self)),
              double.isFinite
        else { throw JSONParseError("a number out of range", at: start, inValue: true) }
        return .double(double)
    }

    /// `-?[0-9]+` as an Int, or nil when it does not fit.
    private func integer(_ start: Int, _ end: Int) -> Int? {
        let negative = bytes[start] == .minus
        var value = 0
        for position in (negative ? start + 1 : start) ..< end {
            let digit = Int(bytes[position] &- .zero)
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return nil }
            value = sum
        }
        return value
    }

    /// The exact value of a number with a fraction or an exponent, when it is an integer that
    /// fits an Int: its digits times a power of ten, worked out on the digits themselves.
    private func integralValue(_ start: Int, _ end: Int) -> Int? {
        var digitsStart = bytes[start] == .minus ? start + 1 : start
        var digitsEnd = digitsStart
        while digitsEnd < end, bytes[digitsEnd] != .e, bytes[digitsEnd] != UInt8(ascii: "E") { digitsEnd += 1 }
        // The exponent, clamped: anything past ±10^6 is far outside an Int either way.
        var exponent = 0
        if digitsEnd < end {
            var position = digitsEnd + 1
            let negativeExponent = bytes[position] == .minus
            if bytes[position] == .minus || bytes[position] == .plus { position += 1 }
            while position < end {
                exponent = min(exponent * 10 + Int(bytes[position] &- .zero), 1_000_000)
                position += 1
            }
            if negativeExponent { exponent = -exponent }
        }
        // Digits without the point: each fraction digit lowers the exponent by one.
        var digits: [UInt8] = []
        var seenPoint = false
        for position in digitsStart ..< digitsEnd {
            let byte = bytes[position]
            if byte == .dot {
                seenPoint = true
            } else {
                digits.append(byte &- .zero)
                if seenPoint { exponent -= 1 }
            }
        }
        while let last = digits.last, last == 0 {
            digits.removeLast()
            exponent += 1
        }
        digitsStart = digits.firstIndex { $0 != 0 } ?? digits.count
        if digitsStart == digits.count { return 0 }
        guard exponent >= 0, digits.count - digitsStart + exponent <= 19 else { return nil }
        let negative = bytes[start] == .minus
        var value = 0
        for digit in digits[digitsStart...] + repeatElement(0, count: exponent) {
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = negative ? times10.subtractingReportingOverflow(Int(digit)) : times10.addingReportingOverflow(Int(digit))
            if overflow1 || overflow2 { return nil }
            value = sum
        }
        return value
    }

    // MARK: - Messages

    private static func show(_ byte: UInt8, quoted: Bool = true) -> String {
        if byte >= 0x21, byte < 0x7F {
            let text = String(UnicodeScalar(byte))
            return quoted ? "'\(text)'" : text
        }
        return byte < 0x80 ? "U+00\(hex(UInt32(byte), digits: 2))" : "byte 0x\(hex(UInt32(byte), digits: 2))"
    }

    private static func hex(_ value: UInt32, digits: Int = 4) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

/// An object's key as it appears in the text. Comparing it with a name builds no string.
public struct JSONKey {
    @usableFromInline let token: StringToken
    @usableFromInline let bytes: UnsafeBufferPointer<UInt8>

    /// The key, unescaped.
    public var string: String { token.string(in: bytes) }

    @inlinable
    public static func == (key: JSONKey, name: StaticString) -> Bool { key.token.equals(name, in: key.bytes) }
}

/// Where a checked string lies in the text, between its quotes.
@usableFromInline
struct StringToken {
    @usableFromInline let start: Int
    @usableFromInline let end: Int
    @usableFromInline let hasEscapes: Bool

    @inlinable
    func equals(_ name: StaticString, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let candidate = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        guard hasEscapes else {
            return candidate.count == end - start && memcmp(candidate.baseAddress!, bytes.baseAddress! + start, candidate.count) == 0
        }
        return string(in: bytes) == String(decoding: candidate, as: UTF8.self)
    }

    /// The string's value. The bytes were checked by `scanString`: valid UTF-8, escapes whole.
    @usableFromInline
    func string(in bytes: UnsafeBufferPointer<UInt8>) -> String {
        let raw = UnsafeBufferPointer(rebasing: bytes[start ..< end])
        guard hasEscapes else { return String(decoding: raw, as: UTF8.self) }
        // An escape is never shorter than what it stands for, so the raw length is enough room.
        return String(unsafeUninitializedCapacity: raw.count) { out in
            var read = 0, written = 0
            func put(_ byte: UInt8) {
                out[written] = byte
                written += 1
            }
            while read < raw.count {
                let byte = raw[read]
                guard byte == .backslash else {
                    put(byte)
                    read += 1
                    continue
                }
                let escape = raw[read + 1]
                read += 2
                switch escape {
                case .b: put(0x08)
                case .f: put(0x0C)
                case .n: put(0x0A)
                case .r: put(0x0D)
                case .t: put(0x09)
                case .u:
                    var scalar = Self.hex4(raw, read)
                    read += 4
                    if (0xD800 ..< 0xDC00).contains(scalar) {
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (Self.hex4(raw, read + 2) - 0xDC00)
                        read += 6
                    }
                    switch scalar {
                    case ..<0x80: put(UInt8(scalar))
                    case ..<0x800:
                        put(UInt8(0xC0 | scalar >> 6))
                        put(UInt8(0x80 | scalar & 0x3F))
                    case ..<0x10000:
                        put(UInt8(0xE0 | scalar >> 12))
                        put(UInt8(0x80 | scalar >> 6 & 0x3F))
                        put(UInt8(0x80 | scalar & 0x3F))
                    default:
                        put(UInt8(0xF0 | scalar >> 18))
                        put(UInt8(0x80 | scalar >> 12 & 0x3F))
                        put(UInt8(0x80 | scalar >> 6 & 0x3F))
                        put(UInt8(0x80 | scalar & 0x3F))
                    }
                default: put(escape)  // " \ /
                }
            }
            return written
        }
    }

    private static func hex4(_ raw: UnsafeBufferPointer<UInt8>, _ index: Int) -> UInt32 {
        var value: UInt32 = 0
        for byte in raw[index ..< index + 4] {
            let digit = byte <= .nine ? byte - .zero : (byte | 0x20) - UInt8(ascii: "a") + 10
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}

extension UInt8 {
    fileprivate static let openBrace = UInt8(ascii: "{"), closeBrace = UInt8(ascii: "}")
    fileprivate static let openBracket = UInt8(ascii: "["), closeBracket = UInt8(ascii: "]")
    fileprivate static let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\"), slash = UInt8(ascii: "/")
    fileprivate static let colon = UInt8(ascii: ":"), comma = UInt8(ascii: ",")
    fileprivate static let minus = UInt8(ascii: "-"), plus = UInt8(ascii: "+"), dot = UInt8(ascii: ".")
    fileprivate static let zero = UInt8(ascii: "0"), nine = UInt8(ascii: "9")
    fileprivate static let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
    fileprivate static let lineFeed = UInt8(ascii: "\n"), carriageReturn = UInt8(ascii: "\r")
    fileprivate static let b = UInt8(ascii: "b"), e = UInt8(ascii: "e"), f = UInt8(ascii: "f"), n = UInt8(ascii: "n")
    fileprivate static let r = UInt8(ascii: "r"), t = UInt8(ascii: "t"), u = UInt8(ascii: "u")

    fileprivate var isLetterOrDigit: Bool {
        (UInt8.zero ... UInt8.nine).contains(self) || (UInt8(ascii: "a") ... UInt8(ascii: "z")).contains(self | 0x20)
    }
}
