import XCTest

@testable import Broker
import ConfabProtocol
import Tools

/// A tool's progress words as clients are shown them: no character that moves the cursor,
/// reorders or hides text, no secret (whole or cut), at most 200 characters.
final class ToolProgressTextTests: XCTestCase {
    let secrets = SecretRedactor(secrets: ["sk-progress-secret-0123456789"])

    func testControlAndFormatCharactersOfEveryKindBecomeQuestionMarks() {
        let hostile = "a\u{1B}[2Jb\u{7F}c\u{9B}31md\u{202E}evil\u{200B}zw\u{FEFF}\u{2028}e\u{85}f"
        XCTAssertEqual(ReplyRunner.progressText(hostile, secrets: secrets), "a?[2Jb?c?31md?evil?zw??e?f")
        XCTAssertEqual(ReplyRunner.progressText("counting 3 of 5: café ✓", secrets: secrets), "counting 3 of 5: café ✓")
    }

    func testTheTextIsCutBeforeItIsRedactedAndASecretTheCutSplitIsTakenOutToo() {
        let whole = "key sk-progress-secret-0123456789 done"
        XCTAssertEqual(ToolProgressTextTests.text(whole, secrets), "key [secret] done")
        // The cut falls inside the secret: its first half is no more readable than the whole.
        let padding = String(repeating: "x", count: ToolProgress.maxTextCharacters - 15)
        let cut = ToolProgressTextTests.text(padding + "sk-progress-secret-0123456789" + String(repeating: "y", count: 100), secrets)
        XCTAssertFalse(cut.contains("sk-progress"), cut)
        XCTAssertTrue(cut.hasSuffix("[secret]…"), cut)
        XCTAssertLessThanOrEqual(cut.count, ToolProgress.maxTextCharacters)
        // A long text is cut to the bound, however it is built (joiners made `?` included).
        let long = String(repeating: "👨‍👩‍👧", count: 5000)
        let shown = ToolProgressTextTests.text(long, secrets)
        XCTAssertEqual(shown.count, ToolProgress.maxTextCharacters)
        XCTAssertTrue(shown.hasSuffix("…"))
    }

    static func text(_ words: String, _ secrets: SecretRedactor) -> String { ReplyRunner.progressText(words, secrets: secrets) }
}
