import XCTest

@testable import ConfabProtocol

final class JSONParseTests: XCTestCase {

    private func parse(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> JSON? {
        do {
            return try JSON.parse(text)
        } catch {
            XCTFail("parse of \(text.debugDescription) failed: \(error)", file: file, line: line)
            return nil
        }
    }

    private func isDouble(_ value: JSON?) -> Bool {
        if case .double? = value { return true }
        return false
    }

    private func assertRejected(_ bytes: [UInt8], _ label: String, file: StaticString = #filePath, line: UInt = #line) {
        do {
            let value = try JSON.parse(bytes)
            XCTFail("\(label): expected a parse error, got \(value)", file: file, line: line)
        } catch {
            XCTAssertFalse(error.description.isEmpty, "\(label): the error says something", file: file, line: line)
        }
    }

    private func assertRejected(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        assertRejected(Array(text.utf8), text.debugDescription, file: file, line: line)
    }

    // MARK: - Every type

    func testScalars() {
        XCTAssertEqual(parse("null"), .null)
        XCTAssertEqual(parse("true"), .bool(true))
        XCTAssertEqual(parse("false"), .bool(false))
        XCTAssertEqual(parse("0"), .int(0))
        XCTAssertEqual(parse("42"), .int(42))
        XCTAssertEqual(parse("-17"), .int(-17))
        XCTAssertEqual(parse("1.5"), .double(1.5))
        XCTAssertEqual(parse("-0.25"), .double(-0.25))
        XCTAssertEqual(parse("2.5e-3"), .double(0.0025))
        XCTAssertEqual(parse("\"hello\""), .string("hello"))
        XCTAssertEqual(parse("\"\""), .string(""))
        XCTAssertEqual(parse("[]"), .array([]))
        XCTAssertEqual(parse("{}"), .object([:]))
    }

    func testIntegerExtremes() {
        XCTAssertEqual(parse("9223372036854775807"), .int(Int.max))
        XCTAssertEqual(parse("-9223372036854775808"), .int(Int.min))
    }

    func testBooleansAndNumbersStayDistinct() {
        // 1 and true must not be confused in either direction.
        XCTAssertEqual(parse("1"), .int(1))
        XCTAssertEqual(parse("[true,1,false,0]"), .array([.bool(true), .int(1), .bool(false), .int(0)]))
        XCTAssertEqual(parse("\"1\""), .string("1"))
        XCTAssertEqual(parse("\"true\""), .string("true"))
        XCTAssertEqual(parse("\"null\""), .string("null"))
    }

    func testNestedValue() {
        let text = #"""
            {"a": [1, 2.5, "x", null, true, {"b": {"c": []}}], "d": {}, "e": "\u00e9\n\t\"\\\/", "f": [[[]]]}
            """#
        let expected: JSON = [
            "a": [1, 2.5, "x", nil, true, ["b": ["c": []]]],
            "d": [:],
            "e": "é\n\t\"\\/",
            "f": [[[]]],
        ]
        XCTAssertEqual(parse(text), expected)
    }

    func testStringEscapesAndUnicode() {
        XCTAssertEqual(parse(#""\u0041\u00e9\u65e5""#), .string("Aé日"))
        XCTAssertEqual(parse(#""\ud83c\udf89""#), .string("🎉"), "a surrogate pair is one scalar")
        XCTAssertEqual(parse("\"日本語 🎉\""), .string("日本語 🎉"), "raw UTF-8 in strings")
        XCTAssertEqual(parse(#""\b\f\r""#), .string("\u{08}\u{0C}\r"))
        XCTAssertEqual(parse(#"{"k\u0000":"v\u0000"}"#), .object(["k\u{0}": .string("v\u{0}")]))
    }

    func testSurroundingWhitespaceIsFine() {
        XCTAssertEqual(parse(" \t\r\n {\"a\" : 1 } \n"), .object(["a": 1]))
    }

    func testObjectKeysAreUnordered() {
        XCTAssertEqual(parse(#"{"b":1,"a":2}"#), parse(#"{"a":2,"b":1}"#))
    }

    // MARK: - Errors

    func testMalformedTextIsRejected() {
        let bad = [
            "", " ", "{", "}", "[", "[,]", "[,1]", "[1,,2]", "[1 2]", "{\"a\"}", "{\"a\":}", "{\"a\" 1}", "{'a':1}", "{a:1}",
            "tru", "nul", "True", "NaN", "Infinity", "-", "+1", ".5", "1.", "01", "0x10", "\"unterminated",
            "\"bad escape \\x\"", "\"\\u12\"", "{,}", "{\"a\":1,,}", "/* comment */ 1",
        ]
        for text in bad { assertRejected(text) }
    }

    /// RFC 8259 has no trailing commas, and docs/protocol.md answers "not JSON" with -32700.
    func testTrailingCommasAreRejected() {
        for text in ["[1,]", "[\"a\",]", "{\"a\":1,}", #"{"jsonrpc":"2.0","id":1,"method":"status",}"#, "[1 , ]", "{\"a\":1,\n}"] {
            assertRejected(text)
            XCTAssertThrowsError(try JSON.parse(text)) { XCTAssertTrue("\($0)".contains("trailing comma"), "\(text): \($0)") }
        }
    }

    func testLoneSurrogateEscapesAreRejected() {
        for text in [#""\ud800""#, #""\udc00""#, #""\ud83c x""#, #""\ud83c\u0041""#, #""\ud83c\ud83c""#, #""\udf89\ud83c""#, #""\ud83c\"#] {
            assertRejected(text)
        }
        XCTAssertEqual(parse(#""a\uD83C\uDF89b""#), .string("a🎉b"), "upper-case hex")
        XCTAssertEqual(parse(#""\uffff\u0800\u07ff\u0080\u007f""#), .string("\u{FFFF}\u{800}\u{7FF}\u{80}\u{7F}"), "each UTF-8 length boundary")
        XCTAssertEqual(parse(#""\udbff\udfff""#), .string("\u{10FFFF}"))
    }

    func testEscapedAndRawTextMix() {
        XCTAssertEqual(parse(#""caf\u00e9 é \"q\" \\ \/ end""#), .string("café é \"q\" \\ / end"))
        XCTAssertEqual(parse(#"["\n", "", "\u0000\u0000"]"#), .array(["\n", "", "\u{0}\u{0}"]))
    }

    func testIntegersAreExactAndOtherNumbersAreDoubles() {
        XCTAssertEqual(parse("9007199254740993"), .int(9_007_199_254_740_993), "past 2^53: no trip through Double")
        XCTAssertEqual(parse("-9007199254740993"), .int(-9_007_199_254_740_993))
        XCTAssertTrue(isDouble(parse("9223372036854775808")), "one past Int.max")
        XCTAssertTrue(isDouble(parse("-9223372036854775809")), "one past Int.min, though the nearest Double is Int.min")
        XCTAssertEqual(parse("-0"), .int(0))
        XCTAssertEqual(parse("0.5"), .double(0.5))
        XCTAssertEqual(parse("1E3"), .int(1000), "an integral value is an integer however it is written")
        XCTAssertEqual(parse("2.0"), .int(2))
        XCTAssertEqual(parse("-0.0"), .int(0))
        XCTAssertEqual(parse("0.1e1"), .int(1))
        XCTAssertEqual(parse("1e16"), .int(10_000_000_000_000_000))
        XCTAssertEqual(parse("12345678901234567.0"), .int(12_345_678_901_234_567), "exact, not through Double")
        XCTAssertEqual(parse("-9223372036854775808.0e0"), .int(Int.min))
        XCTAssertTrue(isDouble(parse("92233720368547758.08e2")))
        XCTAssertTrue(isDouble(parse("1e19")))
        XCTAssertTrue(isDouble(parse("10000000000000000.5")), "not an integer, though its nearest Double is")
        XCTAssertEqual(parse("0.000e5"), .int(0))
        XCTAssertEqual(parse("150e-1"), .int(15))
        XCTAssertTrue(isDouble(parse("1.0000000000000001")), "not an integer, though its nearest Double is")
        XCTAssertEqual(parse("1.0000000000000001"), .int(1), "equal as numbers")
        for text in ["2.0", "1E3", "1e16", "150e-1", "-0.0", "12345678901234567.0"] {
            XCTAssertFalse(isDouble(parse(text)), "\(text) is an integer")
        }
        XCTAssertEqual(parse("1e-400"), .int(0), "underflow reads as zero")
        for text in ["1e400", "-1e400", String(repeating: "9", count: 400), "1e999999999999999999999"] { assertRejected(text) }
        for text in ["1.5.2", "1e5e5", "1x", "0x1", "00", "-01", "1.e3", "1e", "1e+", "--1", "- 1", "1_000"] { assertRejected(text) }
    }

    func testLiteralsMustStandAlone() {
        for text in ["truex", "nullnull", "false1", "[true1]", "nul", "tru e"] { assertRejected(text) }
        XCTAssertEqual(parse("[true,false,null]"), .array([true, false, nil]))
    }

    func testByteOrderMarkIsRejected() {
        assertRejected([0xEF, 0xBB, 0xBF] + Array("{}".utf8), "leading byte order mark")
    }

    func testDuplicateKeysAreAllCheckedAndTheFirstWins() {
        XCTAssertEqual(parse(#"{"a":1,"a":2}"#), .object(["a": 1]))
        XCTAssertEqual(parse(#"{"a":1,"\u0061":2}"#), .object(["a": 1]), "an escaped key is the same key")
        for text in [#"{"a":1,"a":01}"#, #"{"a":1,"a":"\x"}"#, #"{"jsonrpc":"2.0","id":1,"method":"status","method":01}"#] {
            assertRejected(text)
        }
    }

    func testErrorsSayWhereTheyAre() {
        let cases = [
            "[1,2": "unexpected end of input in an array at byte 4",
            "{\"a\" 1}": "expected ':' after a key at byte 5",
            "[1 2]": "expected ',' or ']' at byte 3",
            "{\"a\":1} x": "unexpected text after the value at byte 8",
            "[\"ok\",\"a\u{01}\"]": "unreadable value at [1] (control character U+0001 in a string) at byte 8",
            "{\"k\":{\"n\":-}}": "unreadable value at k.n (a number without digits) at byte 10",
            "\"\\ud800\"": "unreadable value at the top level (lone surrogate \\ud800) at byte 1",
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try JSON.parse(text), text) { error in
                XCTAssertEqual("\(error)", "invalid JSON: " + expected, text)
            }
        }
    }

    func testNestingLimitIsExact() {
        let ok = String(repeating: "[", count: JSON.maxNestingDepth) + String(repeating: "]", count: JSON.maxNestingDepth)
        XCTAssertNoThrow(try JSON.parse(ok))
        let objects = String(repeating: "{\"a\":", count: 513) + "1" + String(repeating: "}", count: 513)
        XCTAssertThrowsError(try JSON.parse(objects)) { XCTAssertTrue("\($0)".contains("nested deeper than 512"), "\($0)") }
        let mixed = String(repeating: "[{\"a\":", count: 256) + "1" + String(repeating: "}]", count: 256)
        XCTAssertNoThrow(try JSON.parse(mixed), "512 levels, alternating")
    }

    /// Strings are checked eight bytes at a time where they can be: put each kind of byte that
    /// needs a closer look at every position of strings up to 40 bytes long.
    func testEveryPositionInAStringIsChecked() {
        for length in 0 ... 40 {
            for position in 0 ..< max(length, 1) {
                func text(_ special: String) -> String {
                    String(repeating: "a", count: position) + special + String(repeating: "b", count: max(0, length - position - 1))
                }
                XCTAssertEqual(parse("\"" + text("\\\"") + "\""), .string(text("\"")), "escaped quote at \(position) of \(length)")
                XCTAssertEqual(parse("\"" + text("é") + "\""), .string(text("é")), "non-ASCII at \(position) of \(length)")
                XCTAssertEqual(parse("\"" + text("\u{7F}") + "\""), .string(text("\u{7F}")), "DEL at \(position) of \(length)")
                assertRejected("\"" + text("\u{1F}") + "\"")
                assertRejected("\"" + text("\u{0}") + "\"")
                assertRejected(Array(("\"" + text("x") + "\"").utf8).map { $0 == UInt8(ascii: "x") ? 0xFF : $0 }, "0xFF at \(position) of \(length)")
                assertRejected("\"" + text("a"))
            }
        }
    }

    func testSlicesAndNonContiguousInputParse() throws {
        let line = Array("xx[1,\"two\"]yy".utf8)
        XCTAssertEqual(try JSON.parse(line[2 ..< 11]), .array([1, "two"]))
        XCTAssertEqual(try JSON.parse(Array("{\"a\":[]}".utf8).lazy.map { $0 }), .object(["a": []]))
    }

    func testRawControlCharacterInsideStringIsRejected() {
        assertRejected("\"a\u{01}b\"")
        assertRejected("\"line\nbreak\"")
    }

    func testTrailingGarbageIsRejected() {
        for text in ["{} x", "1 2", "{}}", "[]]", "null null", "\"a\"\"b\"", "{\"a\":1}{\"b\":2}", "true,"] {
            assertRejected(text)
        }
    }

    func testInvalidUTF8IsRejected() {
        assertRejected([0x22, 0xC3, 0x28, 0x22], "0xC3 0x28 inside a string")
        assertRejected([0x22, 0xFF, 0x22], "lone 0xFF inside a string")
        assertRejected([0xFF], "lone 0xFF")
        assertRejected([0x22, 0x61, 0x80, 0x22], "lone continuation byte")
        assertRejected([0x22, 0xC3, 0x22], "truncated sequence")
        assertRejected(Array(#"{"a":""#.utf8) + [0xE6, 0x97] + Array(#""}"#.utf8), "truncated 3-byte sequence")
    }

    func testOverlongAndSurrogateUTF8IsRejected() {
        assertRejected([0x22, 0xC0, 0xAF, 0x22], "overlong '/' (C0 AF)")
        assertRejected([0x22, 0xC1, 0x81, 0x22], "overlong 'A' (C1 81)")
        assertRejected([0x22, 0xE0, 0x80, 0xAF, 0x22], "overlong 3-byte '/'")
        assertRejected([0x22, 0xF0, 0x80, 0x80, 0xAF, 0x22], "overlong 4-byte '/'")
        assertRejected([0x22, 0xED, 0xA0, 0x80, 0x22], "UTF-8 encoded surrogate")
        assertRejected([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], "beyond U+10FFFF")
    }

    /// The scanner counts its nesting and stops past `JSONScanner.maxNestingDepth` (512) levels
    /// with one answer, the same every time: a parse error at the first bracket too many, long
    /// before the stack could run out.
    func testTenThousandNestedArraysAreRejectedAtTheDepthLimit() {
        let depth = 10_000
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        XCTAssertThrowsError(try JSON.parse(text)) { error in
            XCTAssertEqual((error as? JSONParseError)?.reason, "nested deeper than 512 levels", "\(error)")
            XCTAssertEqual((error as? JSONParseError)?.offset, JSONScanner.maxNestingDepth, "at the 513th bracket")
        }
    }

    func testTenThousandNestedObjectsAreRejectedAtTheDepthLimit() {
        let depth = 10_000
        let text = String(repeating: "{\"a\":", count: depth) + "1" + String(repeating: "}", count: depth)
        XCTAssertThrowsError(try JSON.parse(text)) { error in
            XCTAssertEqual((error as? JSONParseError)?.reason, "nested deeper than 512 levels", "\(error)")
        }
    }

    /// Exactly at the limit is still a value, with every level there.
    func testNestingUpToTheLimitIsRead() throws {
        let limit = JSONScanner.maxNestingDepth
        XCTAssertEqual(limit, 512)
        var current = try JSON.parse(String(repeating: "[", count: limit) + String(repeating: "]", count: limit))
        var levels = 0
        while case .array(let items) = current {
            levels += 1
            guard let first = items.first else { break }
            current = first
        }
        XCTAssertEqual(levels, limit)
        let objects = String(repeating: "{\"a\":", count: limit) + "1" + String(repeating: "}", count: limit)
        XCTAssertNoThrow(try JSON.parse(objects))
        XCTAssertThrowsError(try JSON.parse("[" + String(repeating: "[", count: limit) + String(repeating: "]", count: limit) + "]"))
    }

    func testUnbalancedDeepNestingIsRejected() {
        XCTAssertThrowsError(try JSON.parse(String(repeating: "[", count: 10_000)))
    }

    func testHugeNumbersDoNotCrash() {
        for text in ["1e400", "-1e400", "123456789012345678901234567890", "-123456789012345678901234567890",
                     "9223372036854775808", "1e-400", "[1e400]", String(repeating: "9", count: 5000)] {
            // Either an error or a number; never a trap.
            if let value = try? JSON.parse(text) {
                let leaf = value.array?.first ?? value
                XCTAssertEqual(leaf.typeName, "number", text)
            }
        }
    }

    func testAnUnreadableLeafIsNamedByItsPath() {
        let cases = [
            #"{"params":{"items":[1,"\x"]}}"#: "params.items[1]",
            #"["\ud800"]"#: "[0]",
            #"{"a":[01]}"#: "a[0]",
            "[1e400]": "[0]",
        ]
        for (text, path) in cases {
            XCTAssertThrowsError(try JSON.parse(text), text) { error in
                let message = "\(error)"
                XCTAssertTrue(message.contains("unreadable value at \(path) "), "\(text): \(message)")
            }
        }
    }

    func testHugeIntegerBecomesApproximateDouble() throws {
        let value = try JSON.parse("123456789012345678901234567890")
        let double = try XCTUnwrap(value.double)
        XCTAssertEqual(double, 1.2345678901234568e29, accuracy: 1e15)
        XCTAssertNil(value.int, "does not fit an Int")
    }
}

final class JSONScannerTests: XCTestCase {

    private let chunk = #"{"id":"x","choices":[{"index":0,"delta":{"content":"Hi \u00e9"},"finish_reason":null}],"obj\u0065ct":"error","n":12.0}"#

    func testMembersGiveKeysWithoutBuildingTheRest() throws {
        var seen: [String] = []
        var content: String?
        var isError = false
        var number: Int?
        try JSONScanner.read(chunk.utf8) { (scanner) throws(JSONParseError) in
            try scanner.members { (key, scanner) throws(JSONParseError) in
                seen.append(key.string)
                if key == "choices" {
                    try scanner.elements { (_, scanner) throws(JSONParseError) in
                        try scanner.members { (key, scanner) throws(JSONParseError) in
                            guard key == "delta" else { return }
                            try scanner.members { (key, scanner) throws(JSONParseError) in
                                if key == "content" { content = try scanner.readString() }
                            }
                        }
                    }
                } else if key == "object" {
                    isError = try scanner.readString(equalTo: "error")
                } else if key == "n" {
                    number = try scanner.readInt()
                }
            }
        }
        XCTAssertEqual(seen, ["id", "choices", "object", "n"])
        XCTAssertEqual(content, "Hi é")
        XCTAssertTrue(isError, "a key and a value with escapes compare by their value")
        XCTAssertEqual(number, 12)
    }

    func testLenientReadsSkipOtherTypes() throws {
        let values = try JSONScanner.read(#"[1, "s", null, {"a":[1,{"b":"c"}]}, 2.5, true]"#.utf8) { (scanner) throws(JSONParseError) in
            var out: [String] = []
            try scanner.elements { (index, scanner) throws(JSONParseError) in
                switch index {
                case 0: out.append("\(try scanner.readString() as Any)")
                case 1: out.append("\(try scanner.readInt() as Any)")
                case 2: out.append("\(try scanner.readNull())")
                case 3: out.append("\(try scanner.readString(equalTo: "a"))")
                case 4: out.append("\(try scanner.readInt() as Any)")
                default: out.append("\(try scanner.readNull())")
                }
            }
            return out
        }
        XCTAssertEqual(values, ["nil", "nil", "true", "false", "nil", "false"])
    }

    func testWhatTheBodyLeavesUnreadIsStillChecked() {
        for text in [#"{"skip":[1,],"b":1}"#, #"{"skip":"\ud800"}"#, #"{"skip":01}"#, #"{"skip":{"a" 1}}"#, #"{"a":1} x"#] {
            XCTAssertThrowsError(try JSONScanner.read(text.utf8) { (scanner) throws(JSONParseError) in
                try scanner.members { _, _ in }
            }, text)
        }
    }

    func testAnErrorInASkippedValueNamesItsPath() {
        XCTAssertThrowsError(try JSONScanner.read(#"{"a":[0,{"b":"\q"}]}"#.utf8) { (scanner) throws(JSONParseError) in
            try scanner.skipValue()
        }) { error in
            XCTAssertEqual((error as? JSONParseError)?.path, "a[1].b")
        }
    }
}

final class JSONWriteTests: XCTestCase {

    func testScalarsAreCompact() {
        XCTAssertEqual(JSON.null.text, "null")
        XCTAssertEqual(JSON.bool(true).text, "true")
        XCTAssertEqual(JSON.bool(false).text, "false")
        XCTAssertEqual(JSON.int(-42).text, "-42")
        XCTAssertEqual(JSON.int(Int.min).text, "-9223372036854775808")
        XCTAssertEqual(JSON.double(1.5).text, "1.5")
        XCTAssertEqual(JSON.string("hi").text, "\"hi\"")
        XCTAssertEqual(JSON.array([]).text, "[]")
        XCTAssertEqual(JSON.object([:]).text, "{}")
    }

    func testContainersAreCompactWithSortedKeys() {
        let value: JSON = ["zeta": 1, "alpha": [1, "two", nil, false], "mid": ["y": 2, "x": 1], "Beta": true]
        XCTAssertEqual(value.text, #"{"Beta":true,"alpha":[1,"two",null,false],"mid":{"x":1,"y":2},"zeta":1}"#)
    }

    func testEqualValuesWriteEqualBytes() {
        var a: [String: JSON] = [:]
        var b: [String: JSON] = [:]
        let keys = (0..<50).map { "key\($0)" }
        for key in keys { a[key] = .string(key) }
        for key in keys.reversed() { b[key] = .string(key) }
        XCTAssertEqual(JSON.object(a).bytes, JSON.object(b).bytes)
    }

    func testQuoteAndBackslashAreEscaped() {
        XCTAssertEqual(JSON.string("a\"b\\c").text, #""a\"b\\c""#)
        XCTAssertEqual(JSON.object(["k\"ey": "v"]).text, #"{"k\"ey":"v"}"#, "keys are escaped too")
    }

    func testNewlineTabCarriageReturnAreEscaped() {
        XCTAssertEqual(JSON.string("a\nb\tc\rd").text, #""a\nb\tc\rd""#)
        XCTAssertFalse(JSON.string("x\ny").bytes.contains(0x0A), "a written value never contains a raw newline")
    }

    func testOtherControlCharactersUseUnicodeEscapes() {
        XCTAssertEqual(JSON.string("\u{01}").text, #""\u0001""#)
        XCTAssertEqual(JSON.string("\u{00}").text, #""\u0000""#)
        XCTAssertEqual(JSON.string("\u{08}\u{0C}").text, #""\u0008\u000c""#)
        XCTAssertEqual(JSON.string("\u{1F}").text, #""\u001f""#)
        XCTAssertEqual(JSON.string("\u{1B}[0m").text, #""\u001b[0m""#)
        for byte in JSON.string(String(decoding: Array(0..<0x20), as: UTF8.self)).bytes {
            XCTAssertGreaterThanOrEqual(byte, 0x20, "no raw control byte in the output")
        }
    }

    func testNonASCIIPassesThrough() {
        let text = "é 日本 🎉 \u{2028}"
        XCTAssertEqual(JSON.string(text).bytes, [0x22] + Array(text.utf8) + [0x22])
    }

    func testIntegralDoublesAreWrittenAsIntegers() throws {
        XCTAssertEqual(JSON.double(3.0).text, "3")
        XCTAssertEqual(JSON.double(-2.0).text, "-2")
        XCTAssertEqual(JSON.double(0.0).text, "0")
        XCTAssertEqual(JSON.double(-0.0).text, "0")
        XCTAssertEqual(JSON.double(1e14).text, "100000000000000")
        XCTAssertEqual(JSON.double(1e16).text, "10000000000000000", "written so that it reads back as the same number")
        XCTAssertEqual(JSON.double(-0x1p63).text, "-9223372036854775808")
        XCTAssertEqual(JSON.double(0x1p63).text, "9.223372036854776e+18", "past Int: Double's own text")
        XCTAssertEqual(JSON.double(1e16), JSON.int(10_000_000_000_000_000), "numbers compare by value")
        XCTAssertNotEqual(JSON.double(1.5), JSON.int(1))
        XCTAssertNotEqual(JSON.int(1), JSON.bool(true))
        let back = try JSON.parse(JSON.double(3.0).bytes)
        XCTAssertEqual(back.int, 3)
        XCTAssertEqual(back.double, 3.0)
    }

    func testLargeAndSmallDoublesStayValidJSON() throws {
        for value in [1e15, 1e20, -1e300, 1e-7, Double.leastNonzeroMagnitude, Double.greatestFiniteMagnitude, 0.1, 123.456] {
            let parsed = try JSON.parse(JSON.double(value).bytes)
            XCTAssertEqual(parsed.double, value, "\(value) written as \(JSON.double(value).text)")
        }
    }

    func testNonFiniteDoublesBecomeNull() {
        XCTAssertEqual(JSON.double(.nan).text, "null")
        XCTAssertEqual(JSON.double(.infinity).text, "null")
        XCTAssertEqual(JSON.double(-.infinity).text, "null")
    }

    func testRoundTripOfVariedValue() throws {
        let value: JSON = [
            "null": nil,
            "bools": [true, false],
            "ints": [0, 1, -1, .int(Int.max), .int(Int.min), 1_000_000],
            "doubles": [1.5, -0.25, 3.141592653589793, 1e-7, 1e20, 6.02214076e23],
            "strings": ["", "plain", "quote \" backslash \\ slash /", "ctl \u{01}\u{1F}\u{7F}", "nl \n tab \t cr \r",
                        "é日本🎉", "\u{0}"],
            "nested": ["a": ["b": ["c": [[], [:], [[nil]]]]]],
            "weird keys": ["": 1, " ": 2, "\n": 3, "ключ": 4, "🔑": 5],
        ]
        let bytes = value.bytes
        XCTAssertFalse(bytes.contains(0x0A), "compact: one line")
        XCTAssertEqual(try JSON.parse(bytes), value)
        XCTAssertEqual(try JSON.parse(bytes).bytes, bytes, "rewriting is byte-stable")
    }

    func testTextMatchesBytes() {
        let value: JSON = ["a": "é"]
        XCTAssertEqual(Array(value.text.utf8), value.bytes)
    }

    /// Strings are escaped eight bytes at a time: whatever sits where in a word, and at any
    /// length, the bytes are those of escaping one byte at a time.
    func testEscapesWhereverTheyFallInAWord() throws {
        func reference(_ string: String) -> String { referenceEscaped(string, terminalSafe: false) }
        let pieces: [String] = ["a", "\"", "\\", "\n", "\u{1}", "\u{1F}", " ", "~", "\u{7F}", "é", "\u{9B}", "漢", "🙂", "\u{0}"]
        var generator = SystemRandomNumberGenerator()
        for length in 0..<80 {
            for _ in 0..<20 {
                let string = (0..<length).map { _ in pieces.randomElement(using: &generator)! }.joined()
                XCTAssertEqual(JSON.string(string).text, reference(string), string.debugDescription)
            }
        }
        let plain = String(repeating: "plain text ", count: 50)
        XCTAssertEqual(JSON.string(plain + "\"" + plain).text, reference(plain + "\"" + plain))
    }
}

final class JSONAccessorTests: XCTestCase {

    func testAccessors() {
        let value: JSON = ["s": "x", "b": true, "i": 3, "d": 2.5, "di": 4.0, "a": [1], "o": ["k": nil], "n": nil]
        XCTAssertEqual(value["s"]?.string, "x")
        XCTAssertNil(value["s"]?.int)
        XCTAssertEqual(value["b"]?.bool, true)
        XCTAssertNil(value["b"]?.int)
        XCTAssertEqual(value["i"]?.int, 3)
        XCTAssertEqual(value["i"]?.double, 3.0)
        XCTAssertNil(value["d"]?.int, "2.5 is not an integer")
        XCTAssertEqual(value["d"]?.double, 2.5)
        XCTAssertEqual(value["di"]?.int, 4, "integral doubles read as integers")
        XCTAssertEqual(value["a"]?.array, [1])
        XCTAssertEqual(value["o"]?.object, ["k": .null])
        XCTAssertEqual(value["n"]?.isNull, true)
        XCTAssertNil(value["missing"])
        XCTAssertNil(JSON.array([1])["k"])
        XCTAssertNil(JSON.double(1e300).int, "too large for an Int")
    }

    func testTypeNames() {
        XCTAssertEqual(JSON.null.typeName, "null")
        XCTAssertEqual(JSON.bool(true).typeName, "boolean")
        XCTAssertEqual(JSON.int(1).typeName, "number")
        XCTAssertEqual(JSON.double(1.5).typeName, "number")
        XCTAssertEqual(JSON.string("").typeName, "string")
        XCTAssertEqual(JSON.array([]).typeName, "array")
        XCTAssertEqual(JSON.object([:]).typeName, "object")
    }

    func testOptionalHelper() {
        XCTAssertEqual(JSON.optional("a"), .string("a"))
        XCTAssertEqual(JSON.optional(nil), .null)
    }
}

/// What the client prints for `--json`: valid JSON with nothing a terminal would act on.
final class JSONTerminalSafeTests: XCTestCase {
    func testEveryControlIsEscaped() throws {
        var text = ""
        for value in Array(0x00...0x1F) + [0x7F] + Array(0x80...0x9F) + [0x2028, 0x2029, 0x202E, 0x2066, 0x200F] {
            text.unicodeScalars.append(Unicode.Scalar(UInt32(value))!)
        }
        let value = JSON.object(["k\u{9B}": .array([.string(text), .int(1), .null])])
        let written = value.terminalSafeText
        XCTAssertTrue(written.unicodeScalars.allSatisfy { (0x20..<0x7F).contains($0.value) }, written)
        XCTAssertTrue(written.contains(#"\u009b"#) && written.contains(#"\u007f"#) && written.contains(#"\u2028"#), written)
        XCTAssertTrue(written.contains(#"\n"#) && written.contains(#"\t"#) && written.contains(#"\u001b"#), written)
        XCTAssertEqual(try JSON.parse(written), value)
    }

    /// Written in runs of plain bytes between the characters looked at one by one: every mix of
    /// the two, at every position, comes out as a scalar-by-scalar writer makes it.
    func testRunsAndSingleCharactersMixAtEveryPosition() throws {
        let pieces = ["a", "plain text ", "\"", "\\", "\n", "\u{1B}", "\u{7F}", "\u{9B}", "é", "日本", "😀", "\u{202E}", "\u{2028}", "~", " "]
        func expected(_ text: String) -> String { referenceEscaped(text, terminalSafe: true) }
        for first in pieces {
            for second in pieces {
                for third in pieces {
                    let text = first + second + third
                    XCTAssertEqual(JSON.string(text).terminalSafeText, expected(text), text.debugDescription)
                }
            }
        }
        XCTAssertEqual(JSON.string("").terminalSafeText, "\"\"")
    }

    func testOrdinaryTextIsAsItIs() throws {
        let value = JSON.object(["title": .string("Grüße \"quoted\" \\ 日本 😀"), "n": .double(1.5), "ok": .bool(true)])
        XCTAssertEqual(value.terminalSafeText, value.text)
    }
}

/// A JSON string written one scalar at a time, as the writers' rules say (`\"`, `\\`, `\n`, `\r`,
/// `\t`, other controls as `\u00xx`; terminal-safe, every scalar `escapesForTerminal` names as
/// `\uxxxx` too): what the run-copying writers are checked against.
private func referenceEscaped(_ text: String, terminalSafe: Bool) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20 || (terminalSafe && JSON.escapesForTerminal(scalar)):
            let hex = String(scalar.value & 0xFFFF, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}
