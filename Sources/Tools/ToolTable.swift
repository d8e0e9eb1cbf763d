/// Every configured tool, by name.
public struct ToolTable: Sendable, Equatable {
    public private(set) var tools: [String: ToolDefinition]

    /// A name given twice keeps the last.
    public init(_ tools: [ToolDefinition] = []) {
        self.tools = Dictionary(tools.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
    }

    public subscript(name: String) -> ToolDefinition? { tools[name] }

    /// Sorted by name, for listings and for the declarations sent to the model.
    public var sorted: [ToolDefinition] { tools.values.sorted { $0.name < $1.name } }

    public var names: [String] { tools.keys.sorted() }

    public var isEmpty: Bool { tools.isEmpty }

    public var count: Int { tools.count }
}
