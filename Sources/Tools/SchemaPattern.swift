import CRE2

/// A JSON Schema `pattern`, matched in time linear in the string it is matched against: the
/// pattern is written in ECMA-262's dialect (JSON Schema's), rewritten into RE2's syntax
/// with ECMA-262's meaning (`SchemaPattern.rewritten`), and run by RE2, which never
/// backtracks. Patterns come from the config and from MCP servers; the strings from the
/// model: neither may make a check take longer than a pass over the string.
///
/// What ECMA-262 has and a linear-time matcher cannot run (backreferences, lookahead and
/// lookbehind) is refused, naming the construct. As JSON Schema says, a pattern is not
/// anchored (it may match anywhere unless it says `^` or `$`), and it is matched as with
/// ECMA-262's `u` flag: by code point, `.` any one but a line terminator, `\s` every white
/// space and line terminator of ECMA-262, `\d`, `\w` and `\b` ASCII, `\uXXXX` and `\u{…}`
/// code points.
public final class SchemaPattern {
    /// Why a pattern cannot be used.
    public enum Problem: Error, Equatable, Sendable {
        /// It uses a construct of ECMA-262 that a linear-time matcher cannot run, named.
        case unsupported(String)
        /// It is not a regular expression (RE2's words).
        case invalid(String)
    }

    /// The most memory one compiled pattern may take (its program and its search cache): a
    /// bigger pattern is refused, and a check cannot cost more than this.
    public static let maxMemory = 1 << 20

    public let source: String
    private let compiled: OpaquePointer

    private init(source: String, compiled: OpaquePointer) {
        self.source = source
        self.compiled = compiled
    }

    deinit { cre2_free(compiled) }

    /// `pattern` compiled, or what keeps it from being.
    public static func compile(_ pattern: String) -> Result<SchemaPattern, Problem> {
        let translated: String
        switch rewritten(pattern) {
        case .success(let text): translated = text
        case .failure(let problem): return .failure(problem)
        }
        let errorSize = 256
        var error = [CChar](repeating: 0, count: errorSize)
        let compiled = Array(translated.utf8).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { chars in
                cre2_compile(chars.baseAddress, chars.count, Int64(maxMemory), &error, errorSize)
            }
        }
        guard let compiled else {
            let message = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if message.hasPrefix("invalid repetition size") {
                return .failure(.unsupported("more than 1000 repetitions (\(message.dropFirst("invalid repetition size: ".count)); nested repetitions multiply)"))
            }
            if message.hasPrefix("pattern too large") {
                return .failure(.unsupported("more than \(maxMemory >> 20) MiB of compiled program (repetitions of repetitions)"))
            }
            return .failure(.invalid(message))
        }
        return .success(SchemaPattern(source: pattern, compiled: compiled))
    }

    /// Whether the pattern matches somewhere in `text`.
    public func matches(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            bytes.withMemoryRebound(to: CChar.self) { chars in
                // An empty buffer may have no address; RE2 takes a null pointer of length 0.
                cre2_search(compiled, chars.baseAddress, chars.count) == 1
            }
        }
    }

    /// How many instructions the compiled program has (for tests and bounds).
    public var programSize: Int { Int(cre2_program_size(compiled)) }

    // MARK: - ECMA-262 to RE2

    /// ECMA-262's white space and line terminators: what `\s` matches.
    static let whiteSpace: [ClosedRange<UInt32>] = [
        0x09...0x0D, 0x20...0x20, 0xA0...0xA0, 0x1680...0x1680, 0x2000...0x200A,
        0x2028...0x2029, 0x202F...0x202F, 0x205F...0x205F, 0x3000...0x3000, 0xFEFF...0xFEFF,
    ]

    /// Every code point outside `ranges` (sorted, apart), as ranges.
    static func complement(of ranges: [ClosedRange<UInt32>]) -> [ClosedRange<UInt32>] {
        var result: [ClosedRange<UInt32>] = []
        var next: UInt32 = 0
        for range in ranges {
            if range.lowerBound > next { result.append(next...(range.lowerBound - 1)) }
            next = range.upperBound + 1
        }
        if next <= 0x10FFFF { result.append(next...0x10FFFF) }
        return result
    }

    /// Ranges as the inside of an RE2 character class.
    static func classBody(_ ranges: [ClosedRange<UInt32>]) -> String {
        ranges.map { range in
            range.lowerBound == range.upperBound ? code(range.lowerBound) : code(range.lowerBound) + "-" + code(range.upperBound)
        }.joined()
    }

    static func code(_ value: UInt32) -> String { "\\x{" + String(value, radix: 16) + "}" }

    /// `pattern` (ECMA-262) in RE2's syntax with the same meaning, or the construct that has
    /// none there.
    public static func rewritten(_ pattern: String) -> Result<String, Problem> {
        var rewriter = Rewriter(Array(pattern.unicodeScalars))
        return rewriter.run()
    }

    /// One pass over an ECMA-262 pattern, writing RE2: the position, whether it is inside a
    /// character class, and what is written so far. Each construct has its own step.
    private struct Rewriter {
        let scalars: [Unicode.Scalar]
        var index = 0
        var inClass = false
        var out = ""
        let spaceBody = classBody(whiteSpace)
        let nonSpaceBody = classBody(complement(of: whiteSpace))

        init(_ scalars: [Unicode.Scalar]) { self.scalars = scalars }

        func at(_ offset: Int) -> Unicode.Scalar? { index + offset < scalars.count ? scalars[index + offset] : nil }
        func isHex(_ scalar: Unicode.Scalar?) -> Bool { scalar.map { $0.properties.isASCIIHexDigit } ?? false }

        mutating func run() -> Result<String, Problem> {
            while index < scalars.count {
                let problem: Problem?
                switch scalars[index] {
                case "\\": problem = escape()
                case "[": problem = openBracket()
                case "(" where !inClass && at(1) == "?": problem = group()
                default: problem = plain()
                }
                if let problem { return .failure(problem) }
            }
            return .success(out)
        }

        /// A character that means the same in both, or one that only needs respelling.
        private mutating func plain() -> Problem? {
            let scalar = scalars[index]
            switch scalar {
            case "]" where inClass:
                inClass = false
                out += "]"
            case "." where !inClass:
                out += "[^\\n\\r\\x{2028}\\x{2029}]"
            default:
                out.unicodeScalars.append(scalar)
            }
            index += 1
            return nil
        }

        /// `[`: a class opens (or is one of ECMA-262's two special empty forms); inside a class
        /// a literal `[`, which RE2 would read as the start of `[:alpha:]`.
        private mutating func openBracket() -> Problem? {
            if inClass {
                out += "\\["
                index += 1
                return nil
            }
            if at(1) == "]" {
                out += "[^\\x{0}-\\x{10ffff}]"  // matches nothing
                index += 2
                return nil
            }
            if at(1) == "^", at(2) == "]" {
                out += "[\\x{0}-\\x{10ffff}]"  // any one code point
                index += 3
                return nil
            }
            inClass = true
            out += "["
            if at(1) == "^" {
                out += "^"
                index += 1
            }
            index += 1
            return nil
        }

        /// `(?`: lookarounds have no RE2 form; a named group is spelled `(?P<name>…)` there.
        private mutating func group() -> Problem? {
            switch (at(2), at(3)) {
            case ("=", _): return .unsupported("a lookahead (?=…)")
            case ("!", _): return .unsupported("a negative lookahead (?!…)")
            case ("<", "="): return .unsupported("a lookbehind (?<=…)")
            case ("<", "!"): return .unsupported("a negative lookbehind (?<!…)")
            case ("<", _):
                out += "(?P<"
                index += 3
            default:
                out += "("
                index += 1
            }
            return nil
        }

        /// A backslash and what it escapes.
        private mutating func escape() -> Problem? {
            guard let next = at(1) else { return .invalid("trailing \\") }
            switch next {
            case "1"..."9":
                if inClass { return .unsupported("an octal escape (\\\(next))") }
                var digits = String(next)
                while let digit = at(digits.count + 1), ("0"..."9").contains(digit) { digits.unicodeScalars.append(digit) }
                return .unsupported("a backreference (\\\(digits))")
            case "k" where at(2) == "<":
                return .unsupported("a named backreference (\\k<…>)")
            case "0":
                if let digit = at(2), ("0"..."9").contains(digit) { return .unsupported("an octal escape (\\0\(digit))") }
                out += code(0)
            case "s":
                out += inClass ? spaceBody : "[" + spaceBody + "]"
            case "S":
                out += inClass ? nonSpaceBody : "[" + nonSpaceBody + "]"
            case "b" where inClass:
                out += code(8)
            case "d", "D", "w", "W", "b", "B", "t", "n", "r", "f", "v":
                out += "\\" + String(next)
            case "u":
                return unicode()
            case "x":
                guard isHex(at(2)), isHex(at(3)) else { return .invalid("a malformed \\x escape") }
                out += "\\x" + String(scalars[index + 2]) + String(scalars[index + 3])
                index += 4
                return nil
            case "c":
                guard let letter = at(2), letter.properties.isAlphabetic, letter.isASCII else {
                    return .invalid("a malformed \\c escape")
                }
                out += code(letter.value % 32)
                index += 3
                return nil
            case "p", "P":
                return property(next)
            default:
                // ECMA-262 (with `u`) escapes only syntax characters and `/` to mean themselves.
                guard next.isASCII, "^$\\.*+?()[]{}|/-".unicodeScalars.contains(next) else {
                    return .unsupported("the escape \\\(next), which ECMA-262 does not define")
                }
                out += "\\" + String(next)
            }
            index += 2
            return nil
        }

        /// `\uXXXX`, `\u{X…}` or a surrogate pair of two `\uXXXX`: one code point.
        private mutating func unicode() -> Problem? {
            guard let (value, length) = unicodeEscape() else { return .invalid("a malformed \\u escape") }
            guard !(0xD800...0xDFFF).contains(value) else {
                return .unsupported("a lone surrogate (\\u\(String(value, radix: 16, uppercase: true)))")
            }
            out += code(value)
            index += length
            return nil
        }

        /// `\p{Name}` and `\p{Script=Name}`: RE2 knows general categories and scripts by name.
        private mutating func property(_ letter: Unicode.Scalar) -> Problem? {
            guard at(2) == "{", let close = scalars[(index + 3)...].firstIndex(of: "}") else {
                return .invalid("a malformed \\\(letter) escape")
            }
            var name = String(String.UnicodeScalarView(scalars[(index + 3)..<close]))
            for prefix in ["Script=", "sc=", "General_Category=", "gc="] where name.hasPrefix(prefix) {
                name = String(name.dropFirst(prefix.count))
            }
            out += "\\" + String(letter) + "{" + name + "}"
            index = close + 1
            return nil
        }

        /// `\uXXXX` at `index` (at the backslash): its value and length, a surrogate pair joined.
        private func unicodeEscape() -> (UInt32, Int)? {
            if at(2) == "{" {
                var end = index + 3
                var value: UInt32 = 0
                while end < scalars.count, isHex(scalars[end]), value <= 0x10FFFF {
                    value = value * 16 + UInt32(Int(String(scalars[end]), radix: 16)!)
                    end += 1
                }
                guard end < scalars.count, scalars[end] == "}", end > index + 3, value <= 0x10FFFF else { return nil }
                return (value, end + 1 - index)
            }
            func four(_ from: Int) -> UInt32? {
                guard from + 4 <= scalars.count, (from..<from + 4).allSatisfy({ isHex(scalars[$0]) }) else { return nil }
                return UInt32(String(String.UnicodeScalarView(scalars[from..<from + 4])), radix: 16)
            }
            guard let first = four(index + 2) else { return nil }
            if (0xD800...0xDBFF).contains(first), index + 7 < scalars.count, scalars[index + 6] == "\\", scalars[index + 7] == "u",
               let second = four(index + 8), (0xDC00...0xDFFF).contains(second) {
                return (0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00), 12)
            }
            return (first, 6)
        }
    }
}
