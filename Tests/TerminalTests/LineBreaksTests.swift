import Terminal
import XCTest

final class LineBreaksTests: XCTestCase {
    override class func setUp() { DisplayWidth.useUTF8Locale() }

    static let hiding = "Intro\rX\n\nHIDDEN PARAGRAPH\n\nVisible end."

    func testEveryKindOfLineEndBecomesOneNewline() {
        XCTAssertEqual(LineBreaks.normalized("a\rb\r\nc\nd\u{85}e\u{2028}f\u{2029}g"), "a\nb\nc\nd\ne\nf\ng")
        XCTAssertEqual(LineBreaks.normalized("a\r\r\nb\n\rc"), "a\n\nb\n\nc")
        XCTAssertEqual(LineBreaks.normalized("end\r"), "end\n")
        XCTAssertEqual(LineBreaks.normalized("plain text, “quoted” — €"), "plain text, “quoted” — €")
    }

    func testACarriageReturnAtAPiecesEndWaitsForTheNextPiece() {
        var normalizer = LineBreaks.Normalizer()
        XCTAssertEqual(normalizer.feed("one\r"), "one")
        XCTAssertEqual(normalizer.feed("\ntwo\r"), "\ntwo")
        XCTAssertEqual(normalizer.feed("three"), "\nthree")
        XCTAssertEqual(normalizer.feed("\r"), "")
        XCTAssertEqual(normalizer.finish(), "\n")
    }

    /// A lone CR must neither hide a paragraph nor move it: the rows are the same whether
    /// the text is rendered whole or streamed in pieces of any size.
    func testALoneCarriageReturnHidesNothingWholeOrStreamed() {
        let renderer = MarkdownRenderer(colour: false)
        let whole = renderer.render(Self.hiding, width: 40)
        XCTAssertEqual(whole, ["Intro X", "", "HIDDEN PARAGRAPH", "", "Visible end."])
        XCTAssertEqual(renderer.render(Self.hiding.replacingOccurrences(of: "\r", with: "\u{2028}"), width: 40), whole)
        let characters = Array(Self.hiding.unicodeScalars)
        for size in 1...characters.count {
            var stream = MarkdownStream(renderer: renderer, width: 40)
            var shown: [String] = []
            var start = 0
            while start < characters.count {
                let end = min(characters.count, start + size)
                var piece = String.UnicodeScalarView()
                piece.append(contentsOf: characters[start..<end])
                stream.append(String(piece))
                shown += stream.update().committed
                start = end
            }
            shown += stream.finish()
            XCTAssertEqual(shown, whole, "pieces of \(size)")
        }
    }
}
