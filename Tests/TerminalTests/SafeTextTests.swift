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
