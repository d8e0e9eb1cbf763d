import ConfabProtocol
import Foundation
import XCTest

/// `usage.summary` and `confab usage`: tokens and cost summed over the replies the fake upstream
/// reported usage for, priced by the config's `prices` tables.
final class UsageTests: XCTestCase {
    var harness: Harness!

    static func config(input: Double = 2, cachedInput: Double = 0.5, output: Double = 10) -> String {
        """
        [upstream.prices.fake-model]
        input = \(input)
        cached_input = \(cachedInput)
        output = \(output)

        [providers.claude]
        api = "anthropic"
        base_url = "$UPSTREAM/anthropic/v1"
        api_key = "anthropic-test-key"
        model = "fake-claude"

        [providers.claude.prices.fake-claude]
        input = 3
        cached_input = 0.3
        cache_write = 3.75
        output = 15
        """
    }

    override func setUpWithError() throws { harness = try Harness(config: Self.config()) }
    override func tearDown() { harness?.tearDown() }

    private func conversation(_ client: RPCClient, provider: String? = nil, model: String? = nil, title: String) throws -> String {
        var params: [String: JSON] = ["title": .string(title)]
        if let provider { params["provider"] = .string(provider) }
        if let model { params["model"] = .string(model) }
        let id = try XCTUnwrap(try client.call("conversation.create", .object(params))["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return id
    }

    /// Sends `text` and returns the reply's usage as the fake upstream reported it.
    private func send(_ client: RPCClient, _ id: String, _ text: String) throws -> Usage {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let message = try client.awaitReply(reply).final
        XCTAssertEqual(message["status"]?.string, "complete", "\(message)")
        return try XCTUnwrap(message["usage"].flatMap(Usage.init(json:)), "\(message)")
    }

    private func summary(_ client: RPCClient, _ params: UsageParams) throws -> UsageResult {
        try UsageResult(decoding: try client.call("usage.summary", params.json))
    }

    private func cost(_ usages: [Usage], input: Double, cachedInput: Double, cacheWrite: Double, output: Double) -> Double {
        usages.reduce(0) { sum, usage in
            sum + (Double(usage.uncachedPromptTokens) * input + Double(usage.cacheReadTokens ?? 0) * cachedInput
                   + Double(usage.cacheWriteTokens ?? 0) * cacheWrite + Double(usage.completionTokens) * output) / 1_000_000
        }
    }

    private func assertRow(_ row: UsageRow?, _ usages: [Usage], cost expected: Double?, file: StaticString = #filePath, line: UInt = #line) {
        guard let row else { return XCTFail("no row", file: file, line: line) }
        XCTAssertEqual(row.replies, usages.count, file: file, line: line)
        XCTAssertEqual(row.promptTokens, usages.map(\.promptTokens).reduce(0, +), file: file, line: line)
        XCTAssertEqual(row.completionTokens, usages.map(\.completionTokens).reduce(0, +), file: file, line: line)
        XCTAssertEqual(row.cacheReadTokens, usages.map { $0.cacheReadTokens ?? 0 }.reduce(0, +), file: file, line: line)
        XCTAssertEqual(row.cacheWriteTokens, usages.map { $0.cacheWriteTokens ?? 0 }.reduce(0, +), file: file, line: line)
        if let expected {
            XCTAssertEqual(row.cost ?? -1, expected, accuracy: 1e-12, file: file, line: line)
        } else {
            XCTAssertNil(row.cost, file: file, line: line)
        }
    }

    /// Sums by model, conversation and day, priced per provider and model, with cache reads and
    /// writes at their own prices; a model without a price is counted and left out of the cost.
    func testSumsAndCostsByModelConversationAndDay() throws {
        let client = try harness.client()
        let chat = try conversation(client, title: "chat")
        let chatUsage = [try send(client, chat, "one two three [[reply:a b c d]] [[cached:2]]"),
                         try send(client, chat, "four five [[reply:e f]]")]
        XCTAssertEqual(chatUsage[0].cacheReadTokens, 2, "the fake reported a cache read")
        let claude = try conversation(client, provider: "claude", title: "claude")
        let claudeUsage = [try send(client, claude, "question one [[reply:answer one]]"), try send(client, claude, "question two [[reply:answer two]]")]
        XCTAssertGreaterThan(claudeUsage.compactMap(\.cacheWriteTokens).reduce(0, +), 0, "Anthropic's cache was written: \(claudeUsage)")
        let unpriced = try conversation(client, model: "fake-model-2", title: "unpriced")
        let unpricedUsage = [try send(client, unpriced, "no price here [[reply:x y]]")]

        let chatCost = cost(chatUsage, input: 2, cachedInput: 0.5, cacheWrite: 2, output: 10)
        let claudeCost = cost(claudeUsage, input: 3, cachedInput: 0.3, cacheWrite: 3.75, output: 15)
        let byModel = try summary(client, UsageParams(by: .model))
        XCTAssertEqual(byModel.rows.map(\.key).sorted(), ["claude/fake-claude", "default/fake-model", "default/fake-model-2"])
        assertRow(byModel.rows.first { $0.key == "default/fake-model" }, chatUsage, cost: chatCost)
        assertRow(byModel.rows.first { $0.key == "claude/fake-claude" }, claudeUsage, cost: claudeCost)
        assertRow(byModel.rows.first { $0.key == "default/fake-model-2" }, unpricedUsage, cost: nil)
        XCTAssertEqual(byModel.rows.first { $0.key == "default/fake-model-2" }?.unpricedReplies, 1)
        assertRow(byModel.total, chatUsage + claudeUsage + unpricedUsage, cost: chatCost + claudeCost)
        XCTAssertEqual(byModel.total.unpricedReplies, 1)

        let byConversation = try summary(client, UsageParams(by: .conversation))
        assertRow(byConversation.rows.first { $0.key == chat }, chatUsage, cost: chatCost)
        XCTAssertEqual(byConversation.rows.first { $0.key == chat }?.title, "chat")
        assertRow(byConversation.rows.first { $0.key == claude }, claudeUsage, cost: claudeCost)

        let byDay = try summary(client, UsageParams(by: .day))
        XCTAssertEqual(byDay.rows.count, 1, "every reply was asked for today (UTC): \(byDay.rows.map(\.key))")
        assertRow(byDay.rows.first, chatUsage + claudeUsage + unpricedUsage, cost: chatCost + claudeCost)

        // Reply by reply, in one conversation.
        let byMessage = try summary(client, UsageParams(by: .message, conversation: chat))
        XCTAssertEqual(byMessage.rows.map(\.key), ["m2", "m4"])
        assertRow(byMessage.rows.first, [chatUsage[0]], cost: cost([chatUsage[0]], input: 2, cachedInput: 0.5, cacheWrite: 2, output: 10))

        // Since an hour from now: nothing yet.
        let later = try summary(client, UsageParams(since: Timestamp(milliseconds: Timestamp.now().milliseconds + 2 * 3_600_000)))
        XCTAssertEqual(later.rows, [])
        XCTAssertEqual(later.total.replies, 0)

        // After a restart the conversations are on disk: their logs are read once, with the same sums.
        try harness.restartDaemon()
        let again = try harness.client()
        let reread = try summary(again, UsageParams(by: .model))
        XCTAssertEqual(reread.rows.map(\.key), byModel.rows.map(\.key))
        XCTAssertEqual(reread.rows.map(\.replies), byModel.rows.map(\.replies))
        assertRow(reread.total, chatUsage + claudeUsage + unpricedUsage, cost: chatCost + claudeCost)
        // A new reply counts at once; the other logs are not read again.
        try again.call("conversation.attach", ["conversation": .string(chat)])
        let third = try send(again, chat, "six [[reply:g]]")
        let after = try summary(again, UsageParams(by: .conversation))
        assertRow(after.rows.first { $0.key == chat }, chatUsage + [third], cost: cost(chatUsage + [third], input: 2, cachedInput: 0.5, cacheWrite: 2, output: 10))
        assertRow(after.rows.first { $0.key == claude }, claudeUsage, cost: claudeCost)
    }

    /// A reload reprices every reply, past ones too.
    func testAReloadPicksUpNewPrices() throws {
        let client = try harness.client()
        let chat = try conversation(client, title: "chat")
        let usage = [try send(client, chat, "one two [[reply:a b c]]")]
        XCTAssertEqual(try summary(client, UsageParams()).total.cost ?? -1, cost(usage, input: 2, cachedInput: 0.5, cacheWrite: 2, output: 10), accuracy: 1e-12)

        let marker = "config reloaded from"
        let before = harness.log().components(separatedBy: marker).count
        try harness.writeConfig(Self.config(input: 4, cachedInput: 1, output: 20))
        harness.daemon?.signal(SIGHUP)
        let deadline = Date().addingTimeInterval(10)
        while harness.log().components(separatedBy: marker).count == before {
            guard Date() < deadline else { return XCTFail("no reload:\n\(harness.log())") }
            usleep(10_000)
        }
        XCTAssertEqual(try summary(client, UsageParams()).total.cost ?? -1, cost(usage, input: 4, cachedInput: 1, cacheWrite: 4, output: 20), accuracy: 1e-12)
    }

    /// `confab usage`, `confab ls -l` and `confab show` say what the replies cost.
    func testTheClientShowsCosts() throws {
        let client = try harness.client()
        let chat = try conversation(client, title: "priced chat")
        // 1,000,000 prompt tokens would be slow to send: the fake's counts are small, so the
        // cost is printed with four decimals.
        let usage = try send(client, chat, "one two three [[reply:a b c d]]")
        let expected = cost([usage], input: 2, cachedInput: 0.5, cacheWrite: 2, output: 10)
        let shown = UsageTestsFormat.cost(expected)

        let table = try harness.runClient(["usage"])
        XCTAssertEqual(table.status, 0, table.stderr)
        XCTAssertTrue(table.stdout.hasPrefix("MODEL"), table.stdout)
        XCTAssertTrue(table.stdout.contains("default/fake-model"), table.stdout)
        XCTAssertTrue(table.stdout.contains(shown), "\(shown) in \(table.stdout)")
        let json = try harness.runClient(["usage", "--by", "day", "--since", "7d", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertEqual(try JSON.parse(json.stdout)["total"]?["replies"]?.int, 1, json.stdout)
        let wrong = try harness.runClient(["usage", "--since", "7x"])
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.stderr.contains("--since must be"), wrong.stderr)

        let listed = try harness.runClient(["ls", "-l"])
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertTrue(listed.stdout.contains("COST"), listed.stdout)
        XCTAssertTrue(listed.stdout.contains(shown), listed.stdout)

        let show = try harness.runClient(["show", chat])
        XCTAssertEqual(show.status, 0, show.stderr)
        XCTAssertTrue(show.stdout.contains("· cost \(shown)\n"), show.stdout)
        XCTAssertTrue(show.stdout.contains("\ncost \(shown)\n"), show.stdout)
    }
}

/// The client's cost format, written out again so that the test does not trust the code it checks.
enum UsageTestsFormat {
    static func cost(_ value: Double) -> String {
        value < 1 ? String(format: "%.4f", value) : String(format: "%.2f", value)
    }
}
