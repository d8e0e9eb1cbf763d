import ConfabProtocol
import DaemonSettings
import MCP
import Tools

/// A kind of tool the daemon can offer the model: HTTP tools (`HTTPToolSource.swift`), MCP
/// servers (`MCPToolSource.swift`). Each says which of a profile's `tools` entries are its,
/// what it offers for them (with each tool's approval), gets ready what they need, and makes
/// and cancels calls; `ToolSources` asks every source the same question, for `tools.list` and
/// for a reply alike, and gives the tools their model-facing names.
///
/// A new kind is one file with a class conforming to this, a case of `ToolSourceKind` (the word
/// `tools.list` shows), and one line in `ToolSources.init`.
protocol ToolSource: AnyObject {
    /// What `tools.list` calls its tools' source.
    var kind: ToolSourceKind { get }

    /// Whether a profile's entry names tools of this source (asked in registration order: the
    /// first source that says yes has it).
    func serves(_ entry: QualifiedToolName) -> Bool

    /// What it offers for `entries` (nil: everything it has), in order and each tool once,
    /// under `OfferedTool.space`/`tool`; `ToolSources` gives the model-facing names.
    /// `includingUnready`: what `tools.list` shows of a part not ready (the names its config
    /// gives, `isListed: false`); a reply offers only what is ready.
    func offered(for entries: [QualifiedToolName]?, includingUnready: Bool) -> [OfferedTool]

    /// Starts (or waits for) every part `entries` (nil: all) need that is not ready; `settled`
    /// runs once for each, with its name-space and the state it reached. Returns how many
    /// will be settled (0: all is ready, and `settled` never runs).
    func prepare(_ entries: [QualifiedToolName]?, settled: @escaping (_ space: String, _ status: ToolSpaceStatus) -> Void) -> Int

    /// The name-spaces `entries` (nil: all) name, as `tools.list` shows them: `toolCounts` by
    /// space, `seen` the state each reached when the listing waited for it.
    func listedSpaces(for entries: [QualifiedToolName]?, toolCounts: [String: Int], seen: [String: ToolSpaceStatus]) -> [ListedServer]

    /// Checks the model's arguments for one of the tools it offered.
    func validate(_ tool: OfferedTool, arguments: String) -> Result<JSON, ToolArgumentError>

    /// Makes a call of one of the tools it offered; `progress` may run while it runs, `done`
    /// runs once (never after the handle is cancelled).
    func start(_ tool: OfferedTool, arguments: JSON, as call: ToolCallContext,
               progress: @escaping (ToolCallProgress) -> Void, done: @escaping (ToolCallEnding) -> Void) -> any ToolCallHandle
}

extension ToolSource {
    func prepare(_ entries: [QualifiedToolName]?, settled: @escaping (_ space: String, _ status: ToolSpaceStatus) -> Void) -> Int { 0 }

    func listedSpaces(for entries: [QualifiedToolName]?, toolCounts: [String: Int], seen: [String: ToolSpaceStatus]) -> [ListedServer] { [] }
}

/// A name-space's state (an MCP server's).
enum ToolSpaceStatus: Equatable {
    case stopped, starting, ready
    case failed(String)
}

/// A call in flight, for cancel.
protocol ToolCallHandle: AnyObject {
    func cancel()
}

/// Which call a source makes, for its log lines.
struct ToolCallContext {
    var conversation: String
    /// The model's id of the call.
    var call: String
    /// The model-facing name the call used.
    var name: String
}

/// A call's progress as the source reports it (its words untrusted).
struct ToolCallProgress: Equatable {
    var progress: Double
    var total: Double?
    var message: String?
}

/// How a call ended, as its `tool` message records it and the model is told.
struct ToolCallEnding {
    var status: MessageStatus
    var error: MessageError?
    /// What the model is given: the answer, or the error's words.
    var content: String
    var durationMilliseconds: Int
    var httpStatus: Int?
    var truncated: Bool?
}

/// A tool a conversation offers the model (or `tools.list` shows): its model-facing name, and
/// which source has it under which name.
struct OfferedTool {
    /// The name the model calls it by; given by `ToolSources` (a source leaves it empty).
    var name = ""
    /// The source's name-space (an MCP server's name); nil for a name of the one shared
    /// space (an HTTP tool's, which is the model's name too).
    var space: String?
    /// Its name in its source.
    var tool: String
    var description: String
    var parameters: JSON
    var approval: ToolApproval
    /// false: known from the config only (its source is not running), for `tools.list`.
    var isListed = true
    let source: any ToolSource
    /// What the source needs to make a call, read by that source alone.
    let detail: Any

    init(space: String?, tool: String, description: String, parameters: JSON, approval: ToolApproval,
         isListed: Bool = true, source: any ToolSource, detail: Any) {
        self.space = space
        self.tool = tool
        self.description = description
        self.parameters = parameters
        self.approval = approval
        self.isListed = isListed
        self.source = source
        self.detail = detail
    }

    func validate(arguments: String) -> Result<JSON, ToolArgumentError> { source.validate(self, arguments: arguments) }

    /// As `tools.list` shows it.
    var listed: ListedTool {
        ListedTool(name: name, source: source.kind, server: space, tool: space == nil ? nil : tool, description: description,
                   approval: approval, isListed: isListed)
    }
}

/// Every kind of tool source, asked the same questions in one order.
final class ToolSources {
    let all: [any ToolSource]

    init(_ all: [any ToolSource]) {
        self.all = all
    }

    /// Each entry with the source it is of; entries no source serves are dropped (the config
    /// check refuses them).
    private func entries(_ entries: [QualifiedToolName]?, of source: any ToolSource) -> [QualifiedToolName]? {
        guard let entries else { return nil }
        return entries.filter { entry in all.first { $0.serves(entry) } === source }
    }

    /// What `entries` (nil: every configured tool) offer, source by source in registration
    /// order, with model-facing names: a tool of the shared space keeps its name; one in a
    /// name-space gets `SPACE__TOOL`, reduced to what every chat API takes, never a shared-space
    /// name (`MCPToolNames`).
    func offered(for entries: [QualifiedToolName]?, includingUnready: Bool) -> [OfferedTool] {
        var found: [OfferedTool] = []
        for source in all {
            found += source.offered(for: self.entries(entries, of: source), includingUnready: includingUnready)
        }
        for index in found.indices where found[index].space == nil { found[index].name = found[index].tool }
        let shared = Set(found.filter { $0.space == nil }.map(\.tool))
        let names = MCPToolNames(found.compactMap { tool in tool.space.map { MCPToolNames.Target(server: $0, tool: tool.tool) } }, taken: shared)
        return found.compactMap { tool in
            guard let space = tool.space else { return tool }
            guard let name = names.byTarget[MCPToolNames.Target(server: space, tool: tool.tool)] else { return nil }
            var named = tool
            named.name = name
            return named
        }
    }

    /// What a profile's conversations offer a reply now (nil profile: nothing).
    func offered(by profile: Profile?) -> [OfferedTool] {
        guard let profile else { return [] }
        return offered(for: profile.toolEntries, includingUnready: false)
    }

    /// Gets ready what `entries` (nil: everything configured) need: `settled` runs once per
    /// part as it is ready or has failed, and `then` once all have, unless all were at once.
    /// Returns whether `then` will run (false: nothing to wait for, go on now).
    func prepare(_ entries: [QualifiedToolName]?, settled: @escaping (_ space: String, _ status: ToolSpaceStatus) -> Void,
                 then allSettled: @escaping () -> Void) -> Bool {
        // One more than the parts not settled, until every source has been asked.
        var left = 1
        var asking = true
        let one: (String, ToolSpaceStatus) -> Void = { space, status in
            settled(space, status)
            left -= 1
            if left == 0, !asking { allSettled() }
        }
        for source in all { left += source.prepare(self.entries(entries, of: source), settled: one) }
        asking = false
        left -= 1
        return left > 0
    }

    /// `tools.list`'s answer for `entries` (nil: everything configured).
    func listing(for entries: [QualifiedToolName]?, seen: [String: ToolSpaceStatus] = [:]) -> ToolsListResult {
        let tools = offered(for: entries, includingUnready: true)
        var counts: [String: Int] = [:]
        for tool in tools { if let space = tool.space { counts[space, default: 0] += 1 } }
        let spaces = all.flatMap { $0.listedSpaces(for: self.entries(entries, of: $0), toolCounts: counts, seen: seen) }
        return ToolsListResult(tools: tools.map(\.listed), servers: spaces)
    }
}
