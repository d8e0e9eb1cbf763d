import ConfabProtocol

/// What a connected user may do with a conversation. The daemon's own user owns every
/// conversation; another user (one `access.allow_uids` lets connect) has only what the owner
/// shared with them, conversation by conversation (`conversation.share`).
public enum Permission: Int, Comparable, Sendable, CustomStringConvertible {
    case read, write, owner

    public static func < (a: Permission, b: Permission) -> Bool { a.rawValue < b.rawValue }

    public init(_ role: ShareRole) {
        switch role {
        case .read: self = .read
        case .write: self = .write
        }
    }

    /// What `uid` may do with a conversation shared as `shares`, nil when it may not even see it.
    public static func of(_ uid: UInt32, owner: UInt32, shares: [ConversationShare]) -> Permission? {
        if uid == owner { return .owner }
        return shares.role(of: uid).map(Permission.init)
    }

    /// As a reply to a refused call says it.
    public var description: String {
        switch self {
        case .read: "read"
        case .write: "write"
        case .owner: "owner"
        }
    }
}

/// A share link's holder, as the gateway's connection that relays it declared it at `hello`:
/// one conversation, a role. It only ever lowers what the connection's uid may do: the
/// permission is the lower of the two, and nil on every other conversation.
struct LinkGrant: Equatable, Sendable {
    let id: String
    let conversation: String
    let role: ShareRole

    /// 1 to 32 of A-Z, a-z, 0-9, `-` and `_`: shown in `link:ID` beside every message it sends.
    static func isValidID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 32
            && id.utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) || $0 == 45 || $0 == 95 }
    }

    /// What the link allows on `conversation`, given what the uid alone would have.
    func permission(on conversation: String, uidHas: Permission?) -> Permission? {
        guard conversation == self.conversation, let uidHas else { return nil }
        return min(uidHas, Permission(role))
    }
}

/// What each method needs: the role table of docs/protocol.md ("Sharing and roles").
public enum MethodAccess: Equatable, Sendable {
    /// Any connected user; what it answers is limited to the conversations the caller can see.
    case anyone
    /// At least this permission on the conversation the params name (or, with no conversation
    /// named, the owner's).
    case needs(Permission)

    /// The role column of the method table (`MethodRow`).
    public static func of(_ method: RPCMethod) -> MethodAccess { MethodRow.of(method).access }

    /// Names the conversation it acts on (`conversation` in its params).
    public static func isAboutOneConversation(_ method: RPCMethod) -> Bool { MethodRow.of(method).isAboutOneConversation }
}

extension RPCError {
    /// A call the caller's role does not allow. `data` names both roles, so a client can say
    /// what to ask the owner for.
    static func notPermitted(_ method: RPCMethod, has: Permission?, needs: Permission) -> RPCError {
        let why = needs == .owner
            ? "only the owner of the conversations may call \(method.rawValue)"
            : "\(method.rawValue) needs the \(needs) role on this conversation; you have \(has.map(\.description) ?? "none")"
        var data: [String: JSON] = ["needs": .string(needs.description)]
        if let has { data["role"] = .string(has.description) }
        return RPCError(code: RPCError.notPermitted, message: "not permitted: \(why)", data: .object(data))
    }
}
