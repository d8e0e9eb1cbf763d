import XCTest

import Tools

/// A profile's `tools` entry split once: name-space before the first dot, tool after it.
final class QualifiedToolNameTests: XCTestCase {
    func testAnEntryWithoutADotIsAWholeNameSpace() {
        let entry = QualifiedToolName("git")
        XCTAssertEqual(entry.space, "git")
        XCTAssertNil(entry.tool)
        XCTAssertTrue(entry.isWellFormed)
        XCTAssertTrue(entry.covers("git_status"))
        XCTAssertTrue(entry.covers("anything"))
    }

    func testOneToolOfANameSpace() {
        let entry = QualifiedToolName("git.git_status")
        XCTAssertEqual(entry.space, "git")
        XCTAssertEqual(entry.tool, "git_status")
        XCTAssertTrue(entry.covers("git_status"))
        XCTAssertFalse(entry.covers("git_commit"))
        XCTAssertEqual(entry.text, "git.git_status")
        XCTAssertEqual(QualifiedToolName(space: "git", tool: "git_status"), entry)
        XCTAssertEqual(QualifiedToolName(space: "git", tool: nil), QualifiedToolName("git"))
    }

    func testOnlyTheFirstDotSplits() {
        // A server's tool whose own name holds dots keeps them.
        let entry = QualifiedToolName("files.read.v2")
        XCTAssertEqual(entry.space, "files")
        XCTAssertEqual(entry.tool, "read.v2")
        XCTAssertTrue(entry.isWellFormed)
    }

    func testEmptyPartsAreNotWellFormed() {
        for text in ["", ".", "git.", ".status", "..x"] {
            XCTAssertFalse(QualifiedToolName(text).isWellFormed, text)
        }
        XCTAssertEqual(QualifiedToolName("git.").tool, "")
        XCTAssertEqual(QualifiedToolName(".status").space, "")
        XCTAssertEqual(QualifiedToolName("").space, "")
        XCTAssertNil(QualifiedToolName("").tool)
        XCTAssertTrue(QualifiedToolName("a..b").isWellFormed, "a tool whose name starts with a dot is still named")
        XCTAssertEqual(QualifiedToolName("a..b").tool, ".b")
    }

    func testNonASCIIAndTheTextAsWritten() {
        let entry = QualifiedToolName("zeit.jetzt_für_mich")
        XCTAssertEqual(entry.space, "zeit")
        XCTAssertEqual(entry.tool, "jetzt_für_mich")
        XCTAssertEqual("\(entry)", "zeit.jetzt_für_mich")
    }
}
