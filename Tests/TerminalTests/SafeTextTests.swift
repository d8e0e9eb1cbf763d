import Terminal
import XCTest

final class SafeTextTests: XCTestCase {
    func testPlainTextIsUnchanged() {
        let text = "hello, wörld — 你好 👋🏽\n\tindented"
        XCTAssertEqual(SafeText.sanitized(text), text)
    }

    func testEscapeSequencesBecomeVisible() {
        XCTAssertEqual(SafeText.sanitized("\u{1B}]2;PWNED\u{07} plain \u{1B}[31mRED\u{1B}[0m"),
                       "^[]2;PWNED^G plain ^[[31mRED^[[0m")
        XCTAssertEqual(SafeText.sanitized("\u{1B}]52;c;aGVsbG8=\u{1B}\\"), "^[]52;c;aGVsbG8=^[\\")
    }

    func testEveryC0ControlButNewlineAndTabIsReplaced() {
        for value in UInt32(0)..<0x20 {
            let scalar = Unicode.Scalar(value)!
            let out = SafeText.sanitized("a" + String(scalar) + "b")
            switch value {
            case 0x0A, 0x09: XCTAssertEqual(out, "a" + String(scalar) + "b")
            case 0x0D: XCTAssertEqual(out, "ab")
            default: XCTAssertFalse(out.unicodeScalars.contains { $0.value < 0x20 }, "\(value): \(out.debugDescription)")
            }
        }
        XCTAssertEqual(SafeText.sanitized("\u{0}\u{8}\u{C}"), "^@^H^L")
    }

    func testDelAndC1ControlsAsCodePoints() {
        XCTAssertEqual(SafeText.sanitized("x\u{7F}y"), "x^?y")
        // U+009B is CSI on terminals that take 8-bit controls; U+0090 DCS, U+009D OSC.
        XCTAssertEqual(SafeText.sanitized("\u{9B}31m\u{9D}0;t\u{9C}"), "M-^[31mM-^]0;tM-^\\")
        for value in UInt32(0x80)...0x9F {
            let out = SafeText.sanitized(String(Unicode.Scalar(value)!))
            XCTAssertFalse(out.unicodeScalars.contains { $0.value >= 0x7F && $0.value <= 0x9F }, "\(value)")
        }
    }

    func testCharactersWhoseUTF8HoldsC1BytesAreKept() {
        // "Ä" is C3 84 and "€" is E2 82 AC in UTF-8: bytes in 0x80…0x9F that are not controls.
        let text = "Ä € \u{100}\u{A0}"
        XCTAssertEqual(SafeText.sanitized(text), text)
    }

    func testCRLFLineEndsBecomeNewlines() {
        XCTAssertEqual(SafeText.sanitized("one\r\ntwo\rthree"), "one\ntwothree")
    }

    func testSingleLineFoldsLineBreaks() {
        XCTAssertEqual(SafeText.singleLine("a\nb\tc\u{1B}"), "a b c^[")
    }
}

final class InvisibleFormatTests: XCTestCase {
    func testBidiControlsMarksAndSeparatorsAreShownByTheirCodePoints() {
        XCTAssertEqual(SafeText.sanitized("admin\u{202E}txt.exe"), "admin<U+202E>txt.exe")
        XCTAssertEqual(SafeText.singleLine("a\u{2066}b\u{2069}c"), "a<U+2066>b<U+2069>c")
        for value: UInt32 in [0x061C, 0x200E, 0x200F, 0x2028, 0x2029] + Array(0x202A...0x202E) + Array(0x2066...0x2069) {
            let scalar = Unicode.Scalar(value)!
            for out in [SafeText.sanitized("x" + String(scalar) + "y"), SafeText.singleLine("x" + String(scalar) + "y")] {
                XCTAssertFalse(out.unicodeScalars.contains(scalar), String(value, radix: 16))
                XCTAssertTrue(out.contains("<U+" + String(value, radix: 16, uppercase: true).leftPadded(4) + ">"), out)
            }
        }
    }

    func testNeighboursOfThoseCodePointsAreKept() {
        // Typography (U+2013, U+201C, U+2026, U+20AC), a zero-width joiner in an emoji, Arabic and Hebrew letters.
        let text = "– “quoted” … € 👩\u{200D}💻 مرحبا שלום"
        XCTAssertEqual(SafeText.sanitized(text), text)
        XCTAssertEqual(SafeText.singleLine(text), text)
    }
}

private extension String {
    func leftPadded(_ count: Int) -> String { String(repeating: "0", count: max(0, count - self.count)) + self }
}
