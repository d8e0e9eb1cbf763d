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
        XCTAssertEqual(ToolCallFormat.arguments(String(repeating: "y", count: 50), limit: 10), "yyyyyyyyyy…")
    }

    func testLinesAreCutToTheWidthPreviewFirstThenArguments() {
        let content = "{\"temp\":21,\"sky\":\"clear\",\"wind\":\"north-west, strong\"}"
        let answered = ToolCallFormat.Outcome.answered(httpStatus: 200, durationMilliseconds: 84)
        let result = ToolCallFormat.result(name: "weather", outcome: answered, content: content, width: 40)
        XCTAssertEqual(result, "⚙ weather → 200 · 84 ms · {\"temp\":21,\"s…")
        XCTAssertEqual(DisplayWidth.of(result), 40)
        // Too narrow for any of the preview: the status stays whole.
        XCTAssertEqual(ToolCallFormat.result(name: "weather", outcome: answered, content: content, width: 26), "⚙ weather → 200 · 84 ms")

        let arguments = "{\"city\":\"Paris\",\"country\":\"France\",\"units\":\"metric\"}"
        let call = ToolCallFormat.call(name: "weather", arguments: arguments, width: 30)
        XCTAssertEqual(call, "⚙ weather {\"city\":\"Paris\",\"co…")
        XCTAssertEqual(DisplayWidth.of(call), 30)
        let prompt = ToolCallFormat.approvalRequest(name: "weather", arguments: arguments, how: "/approve or /deny", width: 60)
        XCTAssertTrue(prompt.hasPrefix("⚙ weather {\"city\":"), prompt)
        XCTAssertTrue(prompt.hasSuffix("…} needs your approval: /approve or /deny") || prompt.hasSuffix("… needs your approval: /approve or /deny"), prompt)
        XCTAssertEqual(DisplayWidth.of(prompt), 60)
        let summary = ToolCallFormat.summary(name: "weather", arguments: arguments, outcome: answered, width: 40)
        XCTAssertTrue(summary.hasSuffix("… → 200 · 84 ms"), summary)
        XCTAssertEqual(DisplayWidth.of(summary), 40)

        // Wide characters count two columns; nothing is ever wider than asked.
        let wide = ToolCallFormat.result(name: "天気", outcome: answered, content: "東京は晴れです。気温は二十一度。", width: 30)
        XCTAssertLessThanOrEqual(DisplayWidth.of(wide), 30)
        XCTAssertTrue(wide.hasSuffix("…"), wide)
        for width in 1...12 {
            XCTAssertLessThanOrEqual(DisplayWidth.of(ToolCallFormat.call(name: "weather", arguments: arguments, width: width)), width)
        }
    }
}
