import XCTest

@testable import Broker
import ConfabProtocol
import DaemonSettings
import ServiceSettings
import Tools

/// What the tool sources offer a profile, asked once for `tools.list` and for a reply alike:
/// order, model-facing names, each tool's approval, and a third kind of source that needs no
/// more than its class and its registration.
final class ToolSourcesTests: XCTestCase {
    private var b: InProcessBroker!

    override func tearDown() {
        b?.close()
        b = nil
    }

    /// Two HTTP tools (one named as an MCP tool's model-facing name would be, one with a dot)
    /// and two MCP servers that are never started (listing starts nothing).
    private func start(profiles: [Profile] = []) throws {
        b = try InProcessBroker { settings in
            settings.tools = ToolTable([
                ToolDefinition(name: "weather", description: "Weather", url: "http://127.0.0.1:9/w", approval: .always),
                ToolDefinition(name: "git__status", description: "taken", url: "http://127.0.0.1:9/s"),
                ToolDefinition(name: "time.now", description: "dotted", url: "http://127.0.0.1:9/t"),
            ])
            var git = MCPServerSettings(name: "git", command: "/nonexistent/git-mcp", approval: .never, tools: ["status", "commit", "log"])
            git.toolApproval = ["commit": .always]
            let time = MCPServerSettings(name: "time", command: "/nonexistent/time-mcp")
            settings.mcpServers = [git, time]
            settings.profiles = profiles
        }
    }

    private var sources: ToolSources { b.broker.replies.toolSources }

    func testEveryConfiguredToolWithoutAProfile() throws {
        try start()
        let offered = sources.offered(for: nil, includingUnready: true)
        XCTAssertEqual(offered.map(\.name), ["git__status", "time.now", "weather", "git__status_2", "git__commit", "git__log"],
                       "HTTP tools sorted first; then each server's in the config's order, never under an HTTP tool's name")
        XCTAssertEqual(offered.map(\.space), [nil, nil, nil, "git", "git", "git"])
        XCTAssertEqual(offered.map(\.tool), ["git__status", "time.now", "weather", "status", "commit", "log"])
        XCTAssertEqual(offered.map(\.approval), [.never, .never, .always, .never, .always, .never], "a server's tool_approval over its approval")
        XCTAssertEqual(offered.map(\.isListed), [true, true, true, false, false, false], "a server not running is known from its config")
        XCTAssertEqual(offered.map { $0.source.kind }, [.http, .http, .http, .mcp, .mcp, .mcp])
        XCTAssertTrue(sources.offered(for: nil, includingUnready: false).allSatisfy { $0.space == nil }, "a reply offers only what is ready")

        let listing = sources.listing(for: nil)
        XCTAssertEqual(listing.tools[3], ListedTool(name: "git__status_2", source: .mcp, server: "git", tool: "status", description: "",
                                                    approval: .never, isListed: false))
        XCTAssertEqual(listing.tools[2], ListedTool(name: "weather", source: .http, description: "Weather", approval: .always))
        XCTAssertEqual(listing.servers.map(\.name), ["git", "time"])
        XCTAssertEqual(listing.servers.map(\.tools), [3, 0], "the server without a tools filter names none before it runs")
        XCTAssertEqual(listing.servers.map(\.state), [.stopped, .stopped])
    }

    func testAProfileInItsOrderWithEachEntryClaimedOnce() throws {
        try start(profiles: [Profile(name: "p", provider: Provider.defaultName, tools: ["git.log", "time.now", "time", "weather", "git"])])
        let profile = try XCTUnwrap(b.broker.replies.profiles["p"])
        let listing = sources.listing(for: profile.toolEntries)
        // `time.now` is the HTTP tool (a whole name is looked for first), not a tool of server `time`;
        // `git` after `git.log` adds the rest of git's tools, `log` once.
        XCTAssertEqual(listing.tools.map(\.name), ["time.now", "weather", "git__log", "git__status", "git__commit"])
        XCTAssertEqual(listing.servers.map(\.name), ["git", "time"], "servers in the config's order")
        XCTAssertEqual(listing.servers.map(\.tools), [3, 0])
        XCTAssertEqual(sources.offered(by: profile).map(\.name), ["time.now", "weather"], "the servers are not running")

        let only = try XCTUnwrap(Profile(name: "q", provider: Provider.defaultName, tools: ["time.get_time"]).toolEntries.first)
        XCTAssertEqual(sources.listing(for: [only]).tools.map(\.name), ["time__get_time"],
                       "a server with no tools filter is known by the one tool the entry names")
        XCTAssertEqual(sources.listing(for: [QualifiedToolName("nothing")]).tools, [], "an entry no source serves offers nothing")
        XCTAssertEqual(sources.offered(by: nil).count, 0)
    }

    /// A kind of tool besides HTTP and MCP: one class, registered; named, checked and called
    /// through the same questions.
    func testAThirdKindOfSourceIsOneClassAndOneRegistration() throws {
        try start()
        final class Clock: ToolSource {
            var kind: ToolSourceKind { .http }
            var calls: [(String, JSON, String)] = []
            var cancelled = 0
            final class Handle: ToolCallHandle {
                let source: Clock
                init(_ source: Clock) { self.source = source }
                func cancel() { source.cancelled += 1 }
            }
            func serves(_ entry: QualifiedToolName) -> Bool { entry.space == "clock" }
            func offered(for entries: [QualifiedToolName]?, includingUnready: Bool) -> [OfferedTool] {
                ["now", "zone"].filter { name in entries?.contains { $0.covers(name) } ?? true }.map {
                    OfferedTool(space: "clock", tool: $0, description: "the \($0)", parameters: ["type": "object"], approval: .never,
                                source: self, detail: $0)
                }
            }
            func validate(_ tool: OfferedTool, arguments: String) -> Result<JSON, ToolArgumentError> {
                arguments == "{}" ? .success([:]) : .failure(ToolArgumentError(message: "no arguments"))
            }
            func start(_ tool: OfferedTool, arguments: JSON, as call: ToolCallContext,
                       progress: @escaping (ToolCallProgress) -> Void, done: @escaping (ToolCallEnding) -> Void) -> any ToolCallHandle {
                calls.append((tool.detail as! String, arguments, call.name))
                done(ToolCallEnding(status: .complete, content: "12:00", durationMilliseconds: 1))
                return Handle(self)
            }
        }
        let clock = Clock()
        let sources = ToolSources([HTTPToolSource(settings: b.broker.replies.settings, upstream: b.upstream), clock])
        let profile = Profile(name: "p", provider: Provider.defaultName, tools: ["clock.zone", "weather"])
        let offered = sources.offered(by: profile)
        XCTAssertEqual(offered.map(\.name), ["weather", "clock__zone"])
        let zone = try XCTUnwrap(offered.last)
        guard case .failure = zone.validate(arguments: "{\"x\":1}") else { return XCTFail("the source checks its arguments") }
        var ending: ToolCallEnding?
        let handle = zone.source.start(zone, arguments: [:], as: ToolCallContext(conversation: "c", call: "1", name: zone.name),
                                       progress: { _ in }, done: { ending = $0 })
        XCTAssertEqual(clock.calls.map(\.0), ["zone"])
        XCTAssertEqual(clock.calls.map(\.2), ["clock__zone"])
        XCTAssertEqual(ending?.content, "12:00")
        handle.cancel()
        XCTAssertEqual(clock.cancelled, 1)
        XCTAssertEqual(sources.listing(for: nil).tools.map(\.name), ["git__status", "time.now", "weather", "clock__now", "clock__zone"])
        XCTAssertFalse(sources.prepare(nil, settled: { _, _ in XCTFail("nothing to get ready") }, then: { XCTFail("nothing to wait for") }))
    }

    /// The MCP source's start is asked for the servers a profile names and waited for; one that
    /// cannot start settles as failed, and the listing then shows that failure.
    func testPreparingWaitsForEveryServerNamed() throws {
        try start(profiles: [Profile(name: "p", provider: Provider.defaultName, tools: ["weather", "git.log"])])
        let entries = try XCTUnwrap(b.broker.replies.profiles["p"]).toolEntries
        var settled: [String] = []
        var seen: [String: ToolSpaceStatus] = [:]
        var done = false
        let waiting = sources.prepare(entries, settled: { space, status in
            settled.append(space)
            seen[space] = status
        }, then: { done = true })
        if waiting { b.turn(until: { done }) }
        XCTAssertEqual(settled, ["git"], "only the server the profile names")
        guard case .failed = seen["git"] else { return XCTFail("a command that does not exist fails: \(String(describing: seen["git"]))") }
        let listing = sources.listing(for: entries, seen: seen)
        XCTAssertEqual(listing.servers.map(\.state), [.failed])
        XCTAssertEqual(listing.tools.map(\.name), ["weather", "git__log"])
    }
}
