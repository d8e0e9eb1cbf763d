/// One entry of a profile's `tools`, as written: an HTTP tool's name (`weather`), a tool
/// source's name-space (an MCP server, `git`: every tool it offers), or one tool in a
/// name-space (`git.git_status`). Split at the first dot here and nowhere else; which of
/// these an entry is, the daemon's tool sources decide (an HTTP tool's name may itself hold a
/// dot, and is looked for first).
public struct QualifiedToolName: Hashable, Sendable, CustomStringConvertible {
    /// The entry as written.
    public let text: String
    /// Before the first dot; the whole entry when it has none.
    public let space: String
    /// After the first dot; nil when there is none (every tool of `space`).
    public let tool: String?

    public init(_ text: String) {
        self.text = text
        if let dot = text.firstIndex(of: ".") {
            space = String(text[..<dot])
            tool = String(text[text.index(after: dot)...])
        } else {
            space = text
            tool = nil
        }
    }

    /// In one name-space: `space.tool`, or the whole space when `tool` is nil.
    public init(space: String, tool: String?) {
        self.init(tool.map { space + "." + $0 } ?? space)
    }

    /// Both parts name something: not empty, no empty part before or after the dot.
    public var isWellFormed: Bool { !space.isEmpty && tool?.isEmpty != true }

    /// Whether the entry covers `name`, a tool of its name-space.
    public func covers(_ name: String) -> Bool { tool == nil || tool == name }

    public var description: String { text }
}
