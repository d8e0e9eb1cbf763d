/// The names a model is given for MCP tools: `SERVER__TOOL`, reduced to what every chat API
/// accepts (`^[A-Za-z0-9_-]{1,64}$`) and made unique; each maps back to its server and tool
/// exactly, whatever the reduction did.
public struct MCPToolNames: Sendable, Equatable {
    public struct Target: Sendable, Equatable, Hashable {
        public var server: String
        public var tool: String
        public init(server: String, tool: String) {
            self.server = server
            self.tool = tool
        }
    }

    public static let maxLength = 64

    public private(set) var byModelName: [String: Target] = [:]
    public private(set) var byTarget: [Target: String] = [:]

    /// `taken`: names already in use (HTTP tools), which an MCP tool never gets.
    public init(_ targets: [Target], taken: Set<String> = []) {
        var used = taken
        for target in targets where byTarget[target] == nil {
            let base = Self.reduce(target.server) + "__" + Self.reduce(target.tool)
            var name = String(base.prefix(Self.maxLength))
            var suffix = 2
            while used.contains(name) {
                let tail = "_\(suffix)"
                name = String(base.prefix(Self.maxLength - tail.count)) + tail
                suffix += 1
            }
            used.insert(name)
            byModelName[name] = target
            byTarget[target] = name
        }
    }

    /// Every character outside `[A-Za-z0-9_-]` becomes `_`; an empty name becomes `_`.
    static func reduce(_ name: String) -> String {
        let allowed = name.unicodeScalars.map { scalar -> Character in
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", "_", "-": Character(scalar)
            default: "_"
            }
        }
        return allowed.isEmpty ? "_" : String(allowed)
    }
}
