import ConfabLog
import Synchronization
import XCTest

final class LoggerTests: XCTestCase {
    /// The lines a logger wrote.
    private final class Lines: Sendable {
        let written = Mutex<[String]>([])
        var all: [String] { written.withLock { $0 } }
    }

    private func logger(_ level: LogLevel = .info, journal: Bool) -> (Logger, Lines) {
        let lines = Lines()
        return (Logger(level: level, journal: journal) { line in lines.written.withLock { $0.append(line) } }, lines)
    }

    /// What confab-web logs of a refused WebSocket: an Origin header a page chose, holding
    /// ESC (a terminal's title and colours), CR, the bidi override and a newline with a forged
    /// journal priority after it. One line comes out, every control escaped.
    func testAnOriginWithControlsIsOneEscapedLine() {
        let origin = "http://evil.example\u{1B}]0;owned\u{07}\r\u{202E}txt.exe\u{2066}\n<0>forged\u{0}\u{9B}2J\u{7F}"
        let (journal, lines) = logger(journal: true)
        journal.info("refused a WebSocket from origin \(origin)")
        XCTAssertEqual(lines.all, [#"<6>refused a WebSocket from origin http://evil.example\x1B]0;owned\x07\r\u{202E}txt.exe\u{2066}\n<0>forged\x00\u{009B}2J\x7F"# + "\n"])
        let line = lines.all[0].dropLast()
        XCTAssertFalse(line.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || (0x80...0x9F).contains($0.value)
                || (0x202A...0x202E).contains($0.value) || (0x2066...0x2069).contains($0.value) })
        // Outside the journal the level is spelled out, the text escaped the same way.
        let (plain, plainLines) = logger(journal: false)
        plain.warning("origin \(origin)")
        XCTAssertEqual(plainLines.all, ["warning: " + String(lines.all[0].dropFirst("<6>refused a WebSocket from ".count))])
    }

    func testLevelsAreTypedAndFiltered() {
        let (logger, lines) = logger(.warning, journal: true)
        logger.info("not shown")
        logger.debug("not shown")
        logger.warning("w")
        logger.error("e")
        logger.log(.notice, "not shown")
        XCTAssertEqual(lines.all, ["<4>w\n", "<3>e\n"])
        XCTAssertEqual(LogLevel(name: "WARNING"), .warning)
        XCTAssertNil(LogLevel(name: "warn"), "a misspelt level is refused, not taken for info")
        XCTAssertTrue(LogLevel.error > LogLevel.debug)
    }

    func testRedactionComesBeforeEscaping() {
        var (logger, lines) = logger(journal: false)
        logger.redacting = { $0.replacingOccurrences(of: "sk-secret-1234", with: "[secret]") }
        logger.info("key sk-secret-1234\u{1B}[2J")
        XCTAssertEqual(lines.all, [#"info: key [secret]\x1B[2J"# + "\n"])
    }
}
