import XCTest

import ConfabProtocol
import Tools

/// `pattern` as JSON Schema means it (ECMA-262's dialect, unanchored, by code point), run by
/// RE2 in time linear in the string: what a pattern from the config or an MCP server and a
/// string from the model can make a check cost.
final class SchemaPatternTests: XCTestCase {
    private func compiled(_ pattern: String, file: StaticString = #filePath, line: UInt = #line) throws -> SchemaPattern {
        switch SchemaPattern.compile(pattern) {
        case .success(let compiled): return compiled
        case .failure(let problem):
            XCTFail("\(pattern): \(problem)", file: file, line: line)
            throw problem
        }
    }

    private func matches(_ pattern: String, _ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> Bool {
        try compiled(pattern, file: file, line: line).matches(text)
    }

    private func problem(_ pattern: String) -> SchemaPattern.Problem? {
        if case .failure(let problem) = SchemaPattern.compile(pattern) { return problem }
        return nil
    }

    /// The issue's payload: a backtracking matcher took 40 s on 21 characters, doubling with
    /// each more; here the answer is simply there, and right.
    func testNestedRepetitionIsAnsweredAndRight() throws {
        let nested = try compiled("^(a+)+$")
        XCTAssertFalse(nested.matches("aaaaaaaaaaaaaaaaaaaa!"))
        XCTAssertTrue(nested.matches("aaaaaaaaaaaaaaaaaaaa"))
        XCTAssertFalse(nested.matches(String(repeating: "a", count: ToolSchema.maxPatternSubjectLength - 1) + "!"))
        for pattern in ["^(a|a)*$", "^(a|aa)+$", "^(.*a){20}$", "(x+x+)+y"] {
            XCTAssertFalse(try matches(pattern, String(repeating: "a", count: 4000) + "!"), pattern)
        }
        let schema: JSON = ["type": "object", "properties": ["text": ["type": "string", "pattern": "^(a+)+$"]]]
        XCTAssertNil(ToolSchema.problem(in: schema))
        XCTAssertEqual(ToolSchema.validate(["text": "aaaaaaaaaaaaaaaaaaaa!"], against: schema), #""text" must match the pattern "^(a+)+$""#)
        XCTAssertNil(ToolSchema.validate(["text": "aaaaaaaaaaaaaaaaaaaa"], against: schema))
    }

    /// Unanchored unless the pattern says so; `$` is the end of the string only.
    func testSearchIsUnanchored() throws {
        XCTAssertTrue(try matches("[0-9]+", "xx42yy"))
        XCTAssertFalse(try matches("^[0-9]+$", "xx42yy"))
        XCTAssertFalse(try matches("^abc$", "abc\n"), "ECMA-262's $ without m is the end of input, not before a last newline")
        XCTAssertTrue(try matches("", ""))
        XCTAssertTrue(try matches("^$", ""))
    }

    /// By code point, with ECMA-262's `.`, `\s`, `\d` and `\w`.
    func testECMA262Semantics() throws {
        XCTAssertTrue(try matches("^.$", "é"))
        XCTAssertTrue(try matches("^.$", "😀"), "one code point, not two UTF-16 units")
        for terminator in ["\n", "\r", "\u{2028}", "\u{2029}"] {
            XCTAssertFalse(try matches("^.$", terminator), "`.` matches no line terminator: \(terminator.unicodeScalars.first!.value)")
        }
        XCTAssertTrue(try matches("^.$", "\u{0B}"))
        for space in ["\u{A0}", "\u{3000}", "\u{FEFF}", "\u{2003}", "\u{0B}", "\n"] {
            XCTAssertTrue(try matches(#"^\s$"#, space), "\\s: \(space.unicodeScalars.first!.value)")
            XCTAssertFalse(try matches(#"^\S$"#, space), "\\S: \(space.unicodeScalars.first!.value)")
            XCTAssertTrue(try matches(#"^[\s]$"#, space))
            XCTAssertFalse(try matches(#"^[\S]$"#, space))
        }
        XCTAssertTrue(try matches(#"^\S$"#, "x"))
        XCTAssertTrue(try matches(#"^[\s\S]+$"#, "any\nthing\u{2028}😀"))
        XCTAssertFalse(try matches(#"^\d$"#, "٣"), "\\d is ASCII")
        XCTAssertFalse(try matches(#"^\w$"#, "é"), "\\w is ASCII")
        XCTAssertTrue(try matches(#"^\u00e9$"#, "é"))
        XCTAssertTrue(try matches(#"^\u{1F600}$"#, "😀"))
        XCTAssertTrue(try matches(#"^\uD83D\uDE00$"#, "😀"), "a surrogate pair is one code point")
        XCTAssertTrue(try matches(#"^\x41$"#, "A"))
        XCTAssertTrue(try matches(#"^\cJ$"#, "\n"))
        XCTAssertTrue(try matches(#"^a\/b$"#, "a/b"))
        XCTAssertTrue(try matches(#"^[\b]$"#, "\u{08}"), "[\\b] is a backspace")
        XCTAssertTrue(try matches(#"\bword\b"#, "a word here"))
        XCTAssertFalse(try matches("[]", "anything"), "[] matches nothing")
        XCTAssertTrue(try matches("^[^]$", "\n"), "[^] matches any one code point")
        // `[` is literal inside a class, not a POSIX class: one of `[:alph`, then `]`s.
        XCTAssertTrue(try matches("^[[:alpha:]]+$", ":]]"), "[ is literal inside a class, not a POSIX class")
        XCTAssertFalse(try matches("^[[:alpha:]]+$", "abc"))
        XCTAssertTrue(try matches(#"^(?<year>\d{4})-(?:\d\d)$"#, "2026-11"))
        XCTAssertTrue(try matches(#"^\p{Script=Greek}+$"#, "αβγ"))
        XCTAssertTrue(try matches(#"^\p{L}+$"#, "Ünïcødé"))
        XCTAssertTrue(try matches("^x{2,3}$", "xxx"))
        XCTAssertTrue(try matches("^a{1000}$", String(repeating: "a", count: 1000)))
    }

    /// What a linear-time matcher cannot run is refused, naming the construct.
    func testConstructsWithoutALinearTimeMatchAreNamed() {
        XCTAssertEqual(problem(#"(a)\1"#), .unsupported(#"a backreference (\1)"#))
        XCTAssertEqual(problem(#"(?<q>["'])x\k<q>"#), .unsupported(#"a named backreference (\k<…>)"#))
        XCTAssertEqual(problem("a(?=b)"), .unsupported("a lookahead (?=…)"))
        XCTAssertEqual(problem("a(?!b)"), .unsupported("a negative lookahead (?!…)"))
        XCTAssertEqual(problem("(?<=a)b"), .unsupported("a lookbehind (?<=…)"))
        XCTAssertEqual(problem("(?<!a)b"), .unsupported("a negative lookbehind (?<!…)"))
        XCTAssertEqual(problem("a{1001}"), .unsupported("more than 1000 repetitions ({1001}; nested repetitions multiply)"))
        XCTAssertEqual(problem("(a{100}){100}"), .unsupported("more than 1000 repetitions ({100}; nested repetitions multiply)"))
        XCTAssertEqual(problem(#"\a"#), .unsupported(#"the escape \a, which ECMA-262 does not define"#))
        XCTAssertEqual(problem(#"\uD800"#), .unsupported("a lone surrogate (\\uD800)"))
        if case .unsupported(let what)? = problem(#"\p{L}{1,1000}"#) {
            XCTAssertTrue(what.contains("MiB of compiled program"), what)
        } else {
            XCTFail("a pattern whose program is too big is refused")
        }
        if case .invalid? = problem("([a-z") {} else { XCTFail("an unclosed group is not a regular expression") }
        if case .invalid? = problem("a\\") {} else { XCTFail("a trailing backslash is not a regular expression") }
    }

    /// The config refuses such a pattern at load, naming it; for an MCP server's schema it is
    /// left to the server, and the rest of the schema is still checked.
    func testTheConfigRefusesAndAServerKeepsItsOwn() {
        let schema: JSON = ["type": "object", "properties": ["x": ["type": "string", "pattern": #"^(\w)\1$"#, "maxLength": 5]]]
        XCTAssertEqual(ToolSchema.problem(in: schema),
                       #"properties.x.pattern uses a backreference (\1), which confabd cannot match in linear time (RE2): write the pattern without it"#)
        XCTAssertNil(ToolSchema.problem(in: schema, unsupportedPatterns: .leftToServer))
        XCTAssertNil(ToolSchema.validate(["x": "ab"], against: schema), "the pattern is the server's to check")
        XCTAssertEqual(ToolSchema.validate(["x": "abcdefg"], against: schema), #""x" must be at most 5 characters long"#)
    }
}
