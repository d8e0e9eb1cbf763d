import ConfabProtocol

/// What one chunk says of one tool call. Servers differ: OpenAI sends the id and name once and
/// then pieces of `arguments` by `index`; llama.cpp repeats the id and name in every chunk; some
/// send several calls' first pieces in one chunk, or leave out `index`.
public struct ToolCallPiece: Equatable, Sendable {
    public var index: Int?
    public var id: String?
    public var name: String?
    public var arguments: String

    public init(index: Int?, id: String?, name: String?, arguments: String) {
        self.index = index
        self.id = id
        self.name = name
        self.arguments = arguments
    }
}

/// The tool calls of one reply, from their pieces in arrival order: by `index` when the server
/// gives one, else by `id`, else the piece goes on the call before it. The first non-empty id and
/// name of a call stand (a repeated one is the same); `arguments` pieces are joined.
public struct ToolCallAssembler: Sendable {
    private struct Call: Sendable {
        var index: Int?
        var id = ""
        var name = ""
        var arguments = ""
    }
    private var pending: [Call] = []

    public init() {}

    public var isEmpty: Bool { pending.isEmpty }

    public mutating func add(_ piece: ToolCallPiece) {
        let position: Int
        if let index = piece.index {
            position = pending.firstIndex { $0.index == index } ?? append(Call(index: index))
        } else if let id = piece.id, !id.isEmpty {
            position = pending.lastIndex { $0.id == id } ?? append(Call())
        } else {
            position = pending.isEmpty ? append(Call()) : pending.count - 1
        }
        if let id = piece.id, !id.isEmpty, pending[position].id.isEmpty { pending[position].id = id }
        if let name = piece.name, !name.isEmpty, pending[position].name.isEmpty { pending[position].name = name }
        pending[position].arguments += piece.arguments
    }

    private mutating func append(_ call: Call) -> Int {
        pending.append(call)
        return pending.count - 1
    }

    /// The calls in the order they began, each with an id no other call of the reply has: a
    /// call whose server gave no usable id (none, or one that is not 1 to `maxIDLength` of
    /// `A-Z a-z 0-9 _ . : -`) gets `call_<position>`, and one whose id an earlier call
    /// already has (two calls at index 0 and 1 with one id) gets `<id>_<position>` (or the first
    /// free `<id>_<position>_<n>`). Each call is then shown, approved and answered by itself:
    /// an approval by id can never reach a call nobody was shown, and `/approve ID` can always
    /// be typed.
    public var calls: [ToolCall] {
        var taken: Set<String> = []
        return pending.enumerated().map { position, call in
            var id = Self.isUsableID(call.id) ? call.id : "call_\(position)"
            if taken.contains(id) {
                let suffixed = "\(id)_\(position)"
                let base = suffixed.utf8.count <= Self.maxIDLength ? suffixed : "call_\(position)"
                id = base
                var attempt = 2
                while taken.contains(id) {
                    id = "\(base)_\(attempt)"
                    attempt += 1
                }
            }
            taken.insert(id)
            return ToolCall(id: id, name: call.name, arguments: call.arguments)
        }
    }

    /// The longest id a server may give a call; a longer one is replaced.
    public static let maxIDLength = 64

    /// Whether a server's id can stand as it is: short, and only characters a person can type
    /// after `/approve` and a log line shows as they are.
    static func isUsableID(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count <= maxIDLength else { return false }
        return id.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }
}
