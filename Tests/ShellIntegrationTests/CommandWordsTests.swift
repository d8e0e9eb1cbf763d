import XCTest
import ShellIntegration

final class CommandWordsTests: XCTestCase {
    func testWordsAreSplitAtBlanksAndQuotedAsAShellQuotes() {
        XCTAssertEqual(CommandWords.split("a.txt  b.png"), ["a.txt", "b.png"])
        XCTAssertEqual(CommandWords.split(" 'my notes.txt' shot\\ 1.png \"a \\\"b\\\".md\" "), ["my notes.txt", "shot 1.png", "a \"b\".md"])
        XCTAssertEqual(CommandWords.split("it's\\ fine 'a\\b'"), nil, "an open quote")
        XCTAssertEqual(CommandWords.split("'a\\b' \"c\\d\" e\\\\f"), ["a\\b", "c\\d", "e\\f"])
        XCTAssertEqual(CommandWords.split("x''y \"\""), ["xy", ""])
        XCTAssertEqual(CommandWords.split("tail\\"), ["tail\\"])
        XCTAssertEqual(CommandWords.split(""), [])
    }

    func testEscapedReadsBackAsOneWord() {
        for word in ["my notes.txt", "it's \"quoted\"", "back\\slash", "tab\there", "plain"] {
            XCTAssertEqual(CommandWords.split(CommandWords.escaped(word)), [word], word)
        }
        XCTAssertEqual(CommandWords.escaped("my notes.txt"), "my\\ notes.txt")
    }

    func testTheLastWordIsWhatTabCompletes() {
        let line = "/attach a.txt my\\ no"
        let last = CommandWords.lastWord(line)
        XCTAssertEqual(last.word, "my no")
        XCTAssertEqual(String(line[..<last.start]), "/attach a.txt ")
        let blank = CommandWords.lastWord("/attach a.txt ")
        XCTAssertEqual(blank.word, "")
        XCTAssertEqual(blank.start, "/attach a.txt ".endIndex)
        let quoted = "/attach 'my n"
        XCTAssertEqual(CommandWords.lastWord(quoted).word, "my n")
        XCTAssertEqual(String(quoted[..<CommandWords.lastWord(quoted).start]), "/attach ")
    }
}
