import ShellIntegration
import XCTest

final class KeyTests: XCTestCase {
    func testNotationsAndSequences() throws {
        let alt = try Key(parsing: "alt-a")
        XCTAssertEqual(alt.sequence(for: .bash), #"\ea"#)
        XCTAssertEqual(alt.sequence(for: .zsh), "^[a")
        XCTAssertEqual(alt.sequence(for: .fish), #"\ea"#)
        let control = try Key(parsing: "ctrl-x")
        XCTAssertEqual(control.sequence(for: .bash), #"\C-x"#)
        XCTAssertEqual(control.sequence(for: .zsh), "^X")
        XCTAssertEqual(control.sequence(for: .fish), #"\cx"#)
        let both = try Key(parsing: "ctrl-alt-K")
        XCTAssertEqual(both.sequence(for: .bash), #"\e\C-k"#)
        XCTAssertEqual(both.sequence(for: .zsh), "^[^K")
        XCTAssertEqual(both.sequence(for: .fish), #"\e\ck"#)
        XCTAssertEqual(try Key(parsing: "alt-E").sequence(for: .bash), #"\eE"#)
        XCTAssertEqual(try Key(parsing: "Alt-1").description, "alt-1")
        XCTAssertEqual(Key.defaultCommand, try Key(parsing: "alt-a"))
        XCTAssertEqual(Key.defaultExplain, try Key(parsing: "alt-e"))
    }

    func testRefusals() {
        for bad in ["", "a", "alt-", "alt-ab", "shift-a", "alt-alt-a", "ctrl-1", "alt-é", "alt-;", "ctrl-c", "ctrl-m", "ctrl-j", "ctrl-i", "ctrl-d"] {
            XCTAssertThrowsError(try Key(parsing: bad), bad)
        }
    }
}

final class CommandReplyTests: XCTestCase {
    /// What the key would insert on an 80 × 24 terminal; nil when it inserts nothing.
    func command(from reply: String) -> String? {
        try? CommandReply.checked(reply, screen: .fallback).text
    }

    func testFirstFencedBlockWins() {
        let reply = "Here you go:\n\n```bash\nfind . -size +100M -print\n```\n\nOr:\n```\nls\n```"
        XCTAssertEqual(command(from: reply), "find . -size +100M -print")
    }

    func testMultiLineBlockStaysMultiLine() {
        let reply = "```sh\nfor f in *.log; do\n  gzip \"$f\"\ndone\n```"
        XCTAssertEqual(command(from: reply), "for f in *.log; do\n  gzip \"$f\"\ndone")
    }

    func testTildeFenceLongerFenceAndUnclosed() {
        XCTAssertEqual(command(from: "~~~\nls -la\n~~~"), "ls -la")
        XCTAssertEqual(command(from: "````\necho '```'\n````"), "echo '```'")
        XCTAssertEqual(command(from: "Try:\n```bash\ndu -sh *"), "du -sh *")
        XCTAssertEqual(command(from: "  ```\n  ls\n  ```"), "ls")
    }

    func testPromptsAreStripped() {
        XCTAssertEqual(command(from: "```\n$ cd /tmp\n$ ls\n```"), "cd /tmp\nls")
        // A `$ ` that is part of only some lines is the command's own text.
        XCTAssertEqual(command(from: "```\necho a\n$ b\n```"), "echo a\n$ b")
    }

    func testWithoutFence() {
        XCTAssertEqual(command(from: "  `git status`  \n"), "git status")
        XCTAssertEqual(command(from: "``echo `date` ``"), "echo `date`")
        XCTAssertEqual(command(from: "$ tar xzf a.tgz"), "tar xzf a.tgz")
        XCTAssertEqual(command(from: "\n\nls -1\n\n"), "ls -1")
        XCTAssertNil(command(from: "   "))
    }

    func testControlCharactersNeverReachTheLine() {
        let reply = "```\nls\u{1B}[2J -la\u{07}\r\n\u{202E}rm\u{9B}\n```"
        XCTAssertNil(command(from: reply))
    }
}

final class ConversationNamesTests: XCTestCase {
    func testSessionTitle() {
        XCTAssertEqual(ConversationNames.session(terminal: "/dev/pts/3", directory: "/home/ann/src/app", home: "/home/ann"), "pts/3 ~/src/app")
        XCTAssertEqual(ConversationNames.session(terminal: "/dev/pts/3", directory: "/home/ann", home: "/home/ann"), "pts/3 ~")
        XCTAssertEqual(ConversationNames.session(terminal: "/dev/pts/3", directory: "/home/annex", home: "/home/ann"), "pts/3 /home/annex")
        XCTAssertEqual(ConversationNames.session(terminal: nil, directory: "/srv", home: "/"), "shell /srv")
    }

    func testDayTitle() {
        XCTAssertEqual(ConversationNames.day(year: 2026, month: 11, day: 3), "ask 2026-11-03")
        XCTAssertEqual(ConversationNames.day(year: 2026, month: 1, day: 23), "ask 2026-01-23")
    }

    func testSessionIds() {
        XCTAssertTrue(ConversationNames.isValidSession("bash-123-4567"))
        XCTAssertTrue(ConversationNames.isValidSession("fish_1.2"))
        for bad in ["", ".", "..", "../x", "a/b", "a b", "é", String(repeating: "a", count: 129)] {
            XCTAssertFalse(ConversationNames.isValidSession(bad), bad)
        }
    }
}

final class SnippetTests: XCTestCase {
    func testKeysAndPathAreFilledIn() throws {
        let snippet = Snippet(shell: .zsh, executable: "/opt/it's here/confab", commandKey: try Key(parsing: "ctrl-x"), explainKey: .defaultExplain).text
        XCTAssertTrue(snippet.contains("bindkey -M emacs '^X' __confab_command_key"))
        XCTAssertTrue(snippet.contains("bindkey -M emacs '^[e' __confab_explain_key"))
        XCTAssertTrue(snippet.contains(#"typeset -g __confab_bin='/opt/it'\''s here/confab'"#))
        for placeholder in ["@EXE@", "@COMMAND_KEY@", "@EXPLAIN_KEY@", "@COMMAND_NAME@", "@EXPLAIN_NAME@"] {
            XCTAssertFalse(snippet.contains(placeholder), placeholder)
        }
        let bash = Snippet(shell: .bash, executable: "/usr/bin/confab").text
        XCTAssertTrue(bash.contains(#"bind -m emacs -x '"\ea": __confab_command_key'"#))
        XCTAssertFalse(bash.contains("@EXE@"))
        let fish = Snippet(shell: .fish, executable: #"/a\b'c"#).text
        XCTAssertTrue(fish.contains(#"set -g __confab_bin '/a\\b\'c'"#))
        XCTAssertTrue(fish.contains(#"bind \ea __confab_command_key"#))
    }

    func testLastCommandPrompt() {
        let prompt = Prompts.withLastCommand("why?", command: "make test", status: "2")
        XCTAssertEqual(prompt, "My previous command was:\nmake test\nIt exited with status 2.\n\nwhy?")
    }

    func testCommandPromptCarriesContextOnly() {
        let context = ShellContext(shell: "bash", system: "Debian GNU/Linux 12 (bookworm)", directory: "/tmp")
        let prompt = Prompts.command(for: "list big files", context: context)
        XCTAssertTrue(prompt.contains("list big files"))
        XCTAssertTrue(prompt.contains("Shell: bash. OS: Debian GNU/Linux 12 (bookworm). Current directory: /tmp."))
        XCTAssertTrue(prompt.contains("fenced code block"))
    }
}

/// What the command key may put on the command line: exactly what the person sees.
final class CheckedCommandTests: XCTestCase {
    let screen = ScreenSize(columns: 80, rows: 24)

    func testBlankLinesCannotPushALineOutOfSight() throws {
        let reply = "```sh\ntouch FILE\n" + String(repeating: "\n", count: 60) + "   \n\t\nls -la\n```"
        let command = try CommandReply.checked(reply, screen: screen)
        XCTAssertEqual(command.lines, ["touch FILE", "ls -la"])
        XCTAssertEqual(command.text, "touch FILE\nls -la")
        XCTAssertEqual(command.listing, "confab: a command of 2 lines; each one runs when you press Enter:\n1  touch FILE\n2  ls -la\n")
    }

    func testOneLineHasNoListing() throws {
        let command = try CommandReply.checked("Run:\n```\n$ git status   \n```\n", screen: screen)
        XCTAssertEqual(command.text, "git status")
        XCTAssertEqual(command.listing, "")
        XCTAssertEqual(try CommandReply.checked("`ls -1`\r\n", screen: screen).text, "ls -1")
    }

    func testListingNumbersAlign() throws {
        let lines = (1...10).map { "echo \($0)" }
        let command = try CommandReply.checked("```\n" + lines.joined(separator: "\n") + "\n```", screen: ScreenSize(columns: 80, rows: 40))
        XCTAssertTrue(command.listing.contains("\n 1  echo 1\n"), command.listing)
        XCTAssertTrue(command.listing.hasSuffix("\n10  echo 10\n"), command.listing)
    }

    func testEveryHidingCharacterRefusesTheWholeCommand() {
        let hiding: [Unicode.Scalar] = ["\u{0}", "\u{7}", "\u{8}", "\t", "\r", "\u{1B}", "\u{7F}", "\u{85}", "\u{9B}",
                                        "\u{200B}", "\u{200E}", "\u{202E}", "\u{2066}", "\u{2028}", "\u{2029}", "\u{FEFF}", "\u{AD}"]
        for scalar in hiding {
            let reply = "```\ntouch FILE\nls \(Character(scalar))-la\n```"
            XCTAssertThrowsError(try CommandReply.checked(reply, screen: screen), "U+\(String(scalar.value, radix: 16))") { error in
                XCTAssertEqual(error as? CommandReply.Refusal, .hiddenCharacter(line: 2, scalar: scalar))
            }
        }
        // CR LF ends a line; a lone CR draws the rest of the line over its start.
        XCTAssertEqual(try CommandReply.checked("```\r\nls\r\npwd\r\n```\r\n", screen: screen).lines, ["ls", "pwd"])
        XCTAssertThrowsError(try CommandReply.checked("```\ntouch FILE\rls -la\n```", screen: screen))
        // Letters of other scripts are text, not hiding.
        XCTAssertEqual(try CommandReply.checked("`echo héllo 日本`", screen: screen).text, "echo héllo 日本")
    }

    func testACommandTallerThanTheScreenIsRefused() {
        let lines = (1...11).map { "echo \($0)" }
        let reply = "```\n" + lines.joined(separator: "\n") + "\n```"
        // Eleven lines, shown twice (22 rows), and three rows for the prompt and the heading: 25 > 24.
        XCTAssertThrowsError(try CommandReply.checked(reply, screen: screen)) { error in
            XCTAssertEqual(error as? CommandReply.Refusal, .tooTall(lines: 11, rows: 22, room: 21))
        }
        XCTAssertNoThrow(try CommandReply.checked(reply, screen: ScreenSize(columns: 80, rows: 25)))
        // One line can be too tall as well.
        let long = "echo " + String(repeating: "x", count: 80 * 30)
        XCTAssertThrowsError(try CommandReply.checked(long, screen: screen))
    }

    func testNoCommand() {
        XCTAssertThrowsError(try CommandReply.checked("```\n\n   \n```", screen: screen)) { error in
            XCTAssertEqual(error as? CommandReply.Refusal, .noCommand)
        }
        XCTAssertThrowsError(try CommandReply.checked("  ", screen: screen))
    }
}
