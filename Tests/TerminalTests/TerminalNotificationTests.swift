import Terminal
import XCTest

final class TerminalNotificationTests: XCTestCase {
    func testEachKindIsItsTerminalsSequence() {
        XCTAssertEqual(TerminalNotification.sequence(.osc9, title: "confab", body: "reply ended in chat", inTmux: false),
                       "\u{1B}]9;confab: reply ended in chat\u{07}")
        XCTAssertEqual(TerminalNotification.sequence(.osc777, title: "confab", body: "reply ended in chat", inTmux: false),
                       "\u{1B}]777;notify;confab;reply ended in chat\u{07}")
        XCTAssertEqual(TerminalNotification.sequence(.bell, title: "confab", body: "x", inTmux: false), "\u{07}")
        XCTAssertEqual(TerminalNotification.sequence(.off, title: "confab", body: "x", inTmux: false), "")
    }

    func testInsideTmuxTheSequenceGoesThroughItsPassthroughWithEveryEscapeDoubled() {
        XCTAssertEqual(TerminalNotification.sequence(.osc9, title: "confab", body: "hi", inTmux: true),
                       "\u{1B}Ptmux;\u{1B}\u{1B}]9;confab: hi\u{07}\u{1B}\\")
        // The bell is tmux's own to pass on.
        XCTAssertEqual(TerminalNotification.sequence(.bell, title: "confab", body: "hi", inTmux: true), "\u{07}")
    }

    func testATitleFromOthersCannotEndTheSequenceOrDriveTheTerminal() {
        let title = "evil\u{07}\u{1B}]0;pwned\u{1B}\\\u{9C}\u{9D}2;x;y\n\u{202E}z"
        for kind in [TerminalNotification.Kind.osc9, .osc777] {
            for tmux in [false, true] {
                let sequence = TerminalNotification.sequence(kind, title: "confab", body: "reply ended in " + title, inTmux: tmux)
                let scalars = Array(sequence.unicodeScalars)
                // The only control characters are the sequence's own: its ESCs, and one BEL at its end.
                let controls = scalars.filter { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.value == 0x202E }
                let own: [Unicode.Scalar] = tmux ? ["\u{1B}", "\u{1B}", "\u{1B}", "\u{07}", "\u{1B}"] : ["\u{1B}", "\u{07}"]
                XCTAssertEqual(controls, own, sequence.debugDescription)
                if kind == .osc777 {
                    // Exactly the two separators of notify;TITLE;BODY after the number.
                    XCTAssertEqual(sequence.filter { $0 == ";" }.count, tmux ? 4 : 3, sequence.debugDescription)
                }
                XCTAssertTrue(sequence.contains("evil ]0 pwned"), sequence.debugDescription)
            }
        }
    }

    func testLongTextIsCutShort() {
        let body = String(repeating: "a", count: 500)
        let sequence = TerminalNotification.sequence(.osc9, title: "confab", body: body, inTmux: false)
        XCTAssertLessThan(sequence.count, 220)
        XCTAssertTrue(sequence.hasSuffix("…\u{07}"))
    }

    func testTheDefaultIsOffWhereTheTerminalIsNotKnownToTakeIt() {
        XCTAssertEqual(TerminalNotification.kind(setting: nil, term: "xterm-256color", termProgram: nil), .off)
        XCTAssertEqual(TerminalNotification.kind(setting: nil, term: "screen", termProgram: "tmux"), .off)
        XCTAssertEqual(TerminalNotification.kind(setting: "auto", term: "xterm-256color", termProgram: "WezTerm"), .osc9)
        XCTAssertEqual(TerminalNotification.kind(setting: nil, term: "xterm-kitty", termProgram: nil), .osc9)
        XCTAssertEqual(TerminalNotification.kind(setting: nil, term: "foot", termProgram: nil), .osc777)
        XCTAssertEqual(TerminalNotification.kind(setting: "bell", term: "dumb", termProgram: nil), .bell)
        XCTAssertEqual(TerminalNotification.kind(setting: "OSC777", term: nil, termProgram: nil), .osc777)
        XCTAssertNil(TerminalNotification.kind(setting: "loud", term: nil, termProgram: nil))
    }
}
