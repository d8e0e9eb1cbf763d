/// What another user may do with a conversation shared with them (`conversation.share`).
/// The daemon's own user owns every conversation and needs no share.
public enum ShareRole: String, CaseIterable, Sendable, Comparable {
    /// List, attach, history, export, search.
    case read
    /// All of `read`, and send, cancel, regenerate, edit, continue.
    case write

    public static func < (a: ShareRole, b: ShareRole) -> Bool { a == .read && b == .write }
}

/// One user a conversation is shared with, as `shared_with` lists it and the log stores it.
public struct ConversationShare: Equatable, Sendable {
    public var uid: UInt32
    /// The login the uid had when it was shared (the uid alone decides who gets in).
    public var login: String
    public var role: ShareRole

    public init(uid: UInt32, login: String, role: ShareRole) {
        self.uid = uid
        self.login = login
        self.role = role
    }

    public var json: JSON { ["uid": .int(Int(uid)), "login": .string(login), "role": .string(role.rawValue)] }

    public init?(json: JSON) {
        guard let uid = json["uid"]?.int, let id = UInt32(exactly: uid), let login = json["login"]?.string,
              let role = json["role"]?.string.flatMap(ShareRole.init(rawValue:)) else { return nil }
        self.init(uid: id, login: login, role: role)
    }
}

extension Array where Element == ConversationShare {
    /// The role `uid` has, if the conversation is shared with it.
    public func role(of uid: UInt32) -> ShareRole? { first { $0.uid == uid }?.role }

    /// With `share` in place of any earlier share to the same uid, kept in uid order.
    public func sharing(_ share: ConversationShare) -> [ConversationShare] {
        (filter { $0.uid != share.uid } + [share]).sorted { $0.uid < $1.uid }
    }

    public func unsharing(_ uid: UInt32) -> [ConversationShare] { filter { $0.uid != uid } }
}
