import Terminal
import XCTest

final class ToolCallFormatTests: XCTestCase {
    private let wide = 200

    func testACallIsTheNameAndTheArgumentsOnOneLine() {
        XCTAssertEqual(ToolCallFormat.call(name: "weather", arguments: "{\"city\":\"Paris\"}", width: wide),
                       "⚙ weather {\"city\":\"Paris\"}")
        // Pretty-printed JSON loses the white space between its tokens, never inside its strings.
        XCTAssertEqual(ToolCallFormat.call(name: "weather", arguments: "{\n  \"city\": \"Saint Malo\",\n  \"days\": [1, 2]\n}", width: wide),
                       "⚙ weather {\"city\":\"Saint Malo\",\"days\":[1,2]}")
        XCTAssertEqual(ToolCallFormat.arguments("{\"q\": \"say \\\"hi  there\\\" \\\\\", \"n\": 1}"),
                       "{\"q\":\"say \\\"hi  there\\\" \\\\\",\"n\":1}")
        // Not JSON: the runs of white space become one space.
        XCTAssertEqual(ToolCallFormat.arguments("  not json\n\n  at\tall "), "not json at all")
        XCTAssertEqual(ToolCallFormat.call(name: "now", arguments: "", width: wide), "⚙ now")
    }

    func testControlCharactersFromTheModelAndTheToolAreMadeVisible() {
        let call = ToolCallFormat.call(name: "we\u{1B}]0;PWNED\u{07}ather", arguments: "{\"city\":\"\u{1B}[31mParis\u{9B}2J\"}", width: wide)
        XCTAssertEqual(call, "⚙ we^[]0;PWNED^Gather {\"city\":\"^[[31mParisM-^[2J\"}")
        let answered = ToolCallFormat.result(name: "weather", outcome: .answered(httpStatus: 200, durationMilliseconds: 5),
                                             content: "sunny \u{1B}[2J\r\nsecond line", width: wide)
        XCTAssertEqual(answered, "⚙ weather → 200 · 5 ms · sunny ^[[2J …")
        let failed = ToolCallFormat.result(name: "weather", outcome: .failed(code: "tool_\u{7}connection", message: "refused\n\u{1B}[H"),
                                           content: nil, width: wide)
        XCTAssertEqual(failed, "⚙ weather ✗ tool_^Gconnection: refused ^[[H")
        let prompt = ToolCallFormat.approvalRequest(name: "rm\u{8}", arguments: "{\"path\":\"/\u{0}\"}", how: "/approve or /deny (or y/n)", width: wide)
        XCTAssertEqual(prompt, "⚙ rm^H {\"path\":\"/^@\"} needs your approval: /approve or /deny (or y/n)")
        for line in [call, answered, failed, prompt] {
            XCTAssertFalse(line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, line.debugDescription)
        }
    }

    func testEveryOutcomeHasItsForm() {
        func line(_ outcome: ToolCallFormat.Outcome) -> String {
            ToolCallFormat.result(name: "weather", outcome: outcome, content: "{\"temp\": 21}", width: wide)
        }
        XCTAssertEqual(line(.answered(httpStatus: 200, durationMilliseconds: 84)), "⚙ weather → 200 · 84 ms · {\"temp\":21}")
        XCTAssertEqual(line(.answered(httpStatus: nil, durationMilliseconds: nil)), "⚙ weather → answered · {\"temp\":21}")
        XCTAssertEqual(line(.failed(code: "tool_timeout", message: "the tool did not answer within 10 s")),
                       "⚙ weather ✗ tool_timeout: the tool did not answer within 10 s")
        XCTAssertEqual(line(.failed(code: "tool_arguments", message: "")), "⚙ weather ✗ tool_arguments")
        XCTAssertEqual(line(.denied), "⚙ weather ✗ denied")
        XCTAssertEqual(line(.cancelled), "⚙ weather ✗ cancelled")
        XCTAssertEqual(line(.interrupted), "⚙ weather ✗ interrupted")
        XCTAssertEqual(line(.running), "⚙ weather … running")
        XCTAssertEqual(line(.waitingForApproval), "⚙ weather … waiting for approval")
        XCTAssertEqual(ToolCallFormat.summary(name: "weather", arguments: "{\"city\": \"Paris\"}",
                                              outcome: .answered(httpStatus: 200, durationMilliseconds: 84), width: wide),
                       "⚙ weather {\"city\":\"Paris\"} → 200 · 84 ms")
        XCTAssertEqual(ToolCallFormat.summary(name: "weather", arguments: "{}", outcome: .denied, width: wide), "⚙ weather {} ✗ denied")
    }

    func testOutcomesFromAToolMessagesFields() {
        typealias Outcome = ToolCallFormat.Outcome
        XCTAssertEqual(Outcome(status: "complete", httpStatus: 404, durationMilliseconds: 12), .answered(httpStatus: 404, durationMilliseconds: 12))
        XCTAssertEqual(Outcome(status: "streaming"), .running)
        XCTAssertEqual(Outcome(status: "streaming", approval: "pending"), .waitingForApproval)
        XCTAssertEqual(Outcome(status: "streaming", approval: "approved"), .running)
        XCTAssertEqual(Outcome(status: "failed", errorCode: "tool_denied", errorMessage: "the user denied it"), .denied)
        XCTAssertEqual(Outcome(status: "failed", errorCode: "tool_timeout", errorMessage: "slow"), .failed(code: "tool_timeout", message: "slow"))
        XCTAssertEqual(Outcome(status: "failed"), .failed(code: "failed", message: ""))
        XCTAssertEqual(Outcome(status: "cancelled"), .cancelled)
        XCTAssertEqual(Outcome(status: "interrupted"), .interrupted)
        XCTAssertFalse(Outcome.running.isFinal)
        XCTAssertTrue(Outcome.denied.isFinal && Outcome.denied.isFailure)
        XCTAssertFalse(Outcome.cancelled.isFailure)
    }

    func testDurations() {
        XCTAssertEqual(ToolCallFormat.duration(0), "0 ms")
        XCTAssertEqual(ToolCallFormat.duration(999), "999 ms")
        XCTAssertEqual(ToolCallFormat.duration(1000), "1.0 s")
        XCTAssertEqual(ToolCallFormat.duration(1249), "1.2 s")
        XCTAssertEqual(ToolCallFormat.duration(9960), "10.0 s")
        XCTAssertEqual(ToolCallFormat.duration(12_400), "12 s")
    }

    func testAPreviewIsTheAnswersFirstLineWithoutTheDaemonsStatusLine() {
        XCTAssertEqual(ToolCallFormat.preview("HTTP 503\nservice unavailable\nretry later", httpStatus: 503), "service unavailable …")
        XCTAssertEqual(ToolCallFormat.preview("HTTP 5030 is not a status line", httpStatus: 503), "HTTP 5030 is not a status line")
        XCTAssertEqual(ToolCallFormat.preview("\n\n  only line  \n\n", httpStatus: 200), "only line")
        XCTAssertEqual(ToolCallFormat.preview("HTTP 404\r\n{\n \"error\": \"no such city\"\n}", httpStatus: 404), "{\"error\":\"no such city\"}")
        XCTAssertEqual(ToolCallFormat.preview("", httpStatus: 200), "")
        XCTAssertEqual(ToolCallFormat.preview(String(repeating: "x", count: 50), httpStatus: 200, limit: 10), "xxxxxxxxxx …")
    }

    func testLinesWrapBetweenWordsAndOnlyThePreviewIsCut() {
        let content = "{\"temp\":21,\"sky\":\"clear\",\"wind\":\"north-west, strong\"}"
        let answered = ToolCallFormat.Outcome.answered(httpStatus: 200, durationMilliseconds: 84)
        let result = ToolCallFormat.result(name: "weather", outcome: answered, content: content, width: 40)
        XCTAssertEqual(result, "⚙ weather → 200 · 84 ms · {\"temp\":21,\"s…")
        XCTAssertEqual(DisplayWidth.of(result), 40)
        // Too narrow for any of the preview: the status stays whole.
        XCTAssertEqual(ToolCallFormat.result(name: "weather", outcome: answered, content: content, width: 26), "⚙ weather → 200 · 84 ms")
        // An error's words wrap; none is cut.
        let failed = ToolCallFormat.result(name: "weather", outcome: .failed(code: "tool_timeout", message: "the tool did not answer within 10 s"),
                                           content: nil, width: 30)
        XCTAssertEqual(failed.split(separator: "\n"), ["⚙ weather ✗ tool_timeout: the", "  tool did not answer within", "  10 s"])

        let arguments = "{\"city\":\"Paris\",\"country\":\"France\",\"units\":\"metric\"}"
        let call = ToolCallFormat.call(name: "weather", arguments: arguments, width: 30)
        XCTAssertEqual(call.split(separator: "\n"), ["⚙ weather {\"city\":\"Paris\",", "  \"country\":\"France\",", "  \"units\":\"metric\"}"])
        let summary = ToolCallFormat.summary(name: "weather", arguments: arguments, outcome: answered, width: 40)
        XCTAssertEqual(summary.split(separator: "\n"), ["⚙ weather {\"city\":\"Paris\",", "  \"country\":\"France\",\"units\":\"metric\"} →", "  200 · 84 ms"])

        // Wide characters count two columns; nothing is ever wider than asked.
        let wide = ToolCallFormat.result(name: "天気", outcome: answered, content: "東京は晴れです。気温は二十一度。", width: 30)
        XCTAssertLessThanOrEqual(DisplayWidth.of(wide), 30)
        XCTAssertTrue(wide.hasSuffix("…"), wide)
        for width in 2...60 {
            for line in [ToolCallFormat.call(name: "weather", arguments: arguments, width: width),
                         ToolCallFormat.approvalRequest(name: "weather", arguments: arguments, how: "y/n, or /approve c1, /deny c1", width: width)] {
                for row in line.split(separator: "\n") { XCTAssertLessThanOrEqual(DisplayWidth.of(row), width, "\(width): \(line)") }
                // Every character is still there, in order, whatever the width.
                XCTAssertEqual(line.filter { $0 != " " && $0 != "\n" }.hasPrefix("⚙weather{\"city\":\"Paris\",\"country\":\"France\",\"units\":\"metric\"}"), true, line)
            }
        }
    }

    /// The approval line in a 54-column pane: the tool, every argument and how to answer.
    func testTheApprovalLineKeepsEverythingInANarrowPane() {
        let line = ToolCallFormat.approvalRequest(name: "tickets", arguments: "{\"query\":\"login page\",\"state\":\"open\"}",
                                                  how: "y/n, or /approve call_7, /deny call_7", width: 54)
        XCTAssertEqual(line.split(separator: "\n"), [
            "⚙ tickets {\"query\":\"login page\",\"state\":\"open\"} needs",
            "  your approval: y/n, or /approve call_7, /deny call_7",
        ])
    }

    /// A long value must not push a later key out of sight: `admin_delete` after 2,100 spaces.
    func testEveryArgumentKeyIsShownAndALongValueIsShortenedInItsMiddle() {
        let arguments = "{\"query\":\"login page" + String(repeating: " ", count: 2100) + "\", \"state\":\"open\", \"admin_delete\":\"all-tickets\"}"
        let compact = ToolCallFormat.arguments(arguments)
        XCTAssertEqual(compact, "{\"query\":\"login page      …[2,110\u{A0}characters]…        \",\"state\":\"open\",\"admin_delete\":\"all-tickets\"}")
        for line in [ToolCallFormat.approvalRequest(name: "tickets", arguments: arguments, how: "y/n", width: 54),
                     ToolCallFormat.call(name: "tickets", arguments: arguments, width: 54),
                     ToolCallFormat.question(name: "tickets", arguments: arguments, width: 54),
                     ToolCallFormat.summary(name: "tickets", arguments: arguments, outcome: .running, width: 54)] {
            XCTAssertTrue(line.contains("\"admin_delete\":\"all-tickets\""), line.debugDescription)
            XCTAssertTrue(line.contains("2,110\u{A0}characters"), line)
            XCTAssertLessThan(line.count, 200, line)
        }
        // Keys nested anywhere, and keys after an unclosed string, stay too.
        XCTAssertEqual(ToolCallFormat.arguments("{\"a\":{\"b\":\"" + String(repeating: "x", count: 100) + "\",\"c\":1}}", longestValue: 10),
                       "{\"a\":{\"b\":\"xxx…[100\u{A0}characters]…xx\",\"c\":1}}")
        XCTAssertTrue(ToolCallFormat.arguments("{\"a\":\"" + String(repeating: "y", count: 300)).hasSuffix("…[300\u{A0}characters]…" + String(repeating: "y", count: 8)))
        // Text that is not JSON is shortened the same way, with more room.
        XCTAssertEqual(ToolCallFormat.arguments(String(repeating: "y", count: 50), longestValue: 10), "yyyyyyyyyyyyy…[50\u{A0}characters]…yyyyyyy")
        // In full, nothing is left out.
        XCTAssertEqual(ToolCallFormat.fullArguments(arguments).count, arguments.count - 2)
    }

    func testQuestionsEndWithTheirPromptAndWrap() {
        XCTAssertEqual(ToolCallFormat.question(name: "guarded", arguments: "{\"city\": \"Paris\"}", width: 80),
                       "guarded {\"city\":\"Paris\"} — allow? [y/N] ")
        let narrow = ToolCallFormat.question(name: "guarded", arguments: "{\"city\":\"Paris\",\"country\":\"France\"}", width: 30)
        XCTAssertEqual(narrow, "guarded {\"city\":\"Paris\",\n  \"country\":\"France\"} —\n  allow? [y/N] ")
    }
}

final class TextRowsTests: XCTestCase {
    func testRowsBreakBetweenWordsWithAnIndentAfterTheFirst() {
        XCTAssertEqual(TextRows.wrap("-- the reply m4 is replaced by m6 (/versions lists earlier replies) --", width: 40, indent: 3),
                       ["-- the reply m4 is replaced by m6", "   (/versions lists earlier replies) --"])
        XCTAssertEqual(TextRows.wrap("short", width: 40), ["short"])
        XCTAssertEqual(TextRows.wrap("a\n\nb", width: 40), ["a", "", "b"])
        // A word wider than a row is cut where the row ends.
        XCTAssertEqual(TextRows.wrap("see abcdefghijklmnop", width: 8, indent: 2), ["see", "  abcdef", "  ghijkl", "  mnop"])
        // Wide characters count two columns.
        XCTAssertEqual(TextRows.wrap("東京 大阪 名古屋", width: 9), ["東京 大阪", "名古屋"])
        for width in 1...50 {
            for row in TextRows.wrap("/tool [ID]       all a tool answered (ID: a call id or a message id such as m2.1)", width: width, indent: 17) {
                XCTAssertLessThanOrEqual(DisplayWidth.of(row), width, "\(width)")
            }
        }
    }

    func testAClosingMarkStaysWithTheLastWord() {
        XCTAssertEqual(TextRows.wrapped("-- the reply m4 is replaced by m6", closing: " --", width: 33, indent: 3),
                       "-- the reply m4 is replaced by\n   m6 --")
        XCTAssertEqual(TextRows.wrapped("-- bob joined", closing: " --", width: 40, indent: 3), "-- bob joined --")
        XCTAssertEqual(TextRows.wrapped("== design review (k3v9q2m8x7ad)", closing: " ==", width: 32, indent: 3),
                       "== design review\n   (k3v9q2m8x7ad) ==")
    }

    func testTheSecondColumnOfAHelpLine() {
        XCTAssertEqual(TextRows.secondColumn(of: "/history [N]     show N (default 20) earlier messages"), 17)
        XCTAssertEqual(TextRows.secondColumn(of: "  indented  then"), 12)
        XCTAssertEqual(TextRows.secondColumn(of: "one column only"), 0)
    }
}

final class FirstRowTests: XCTestCase {
    func testAStatusThatMustStayOneRowIsCutAfterAWord() {
        XCTAssertEqual(TextRows.firstRow("retry 1 in 3 s · upstream_http: fake upstream error 503", width: 30), "retry 1 in 3 s ·…")
        XCTAssertEqual(TextRows.firstRow("waiting for the model", width: 30), "waiting for the model")
        XCTAssertEqual(TextRows.firstRow("abcdefghij", width: 5), "abcd…")
    }
}
