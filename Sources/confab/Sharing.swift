#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import Terminal

// `confab share` and `confab unshare`: who else may see a conversation.

struct Share: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Let another user see a conversation (and, unless --read-only, write in it).",
        discussion: """
            USER is a login or a uid. The user must also be listed in confabd's \
            access.allow_uids to connect at all. A reader may list, attach, read, export and \
            search the conversation; a writer may also send, cancel, retry and continue. \
            Sharing again changes the role.
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Argument(help: "The user: a login or a uid.") var user: String
    @Flag(name: .customLong("read-only"), help: "Let the user read only.") var readOnly = false

    func run() throws {
        let connection = try Connection.start(socketPath, command: "share")
        let conversation = try connection.resolveConversation(id)
        let role: ShareRole = readOnly ? .read : .write
        let named = SharedUser.named(user)
        let result = try connection.call(ShareCall.self, ShareParams(conversation: conversation, uid: named.uid, login: named.login, role: role))
        let share = result.conversation.sharedWith.first { SharedUser.names($0, user) }
        let who = share.map(SharedUser.describe) ?? SafeText.singleLine(user)
        Out.stdout("shared \(conversation) with \(who), \(role == .read ? "read only" : "read and write")\n")
        if !result.allowed, let uid = share?.uid {
            Out.errorLine("note: uid \(uid) is not in confabd's access.allow_uids, so it cannot connect until it is added there and confabd is reloaded")
        }
    }
}

struct Unshare: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "unshare",
        abstract: "Take a conversation's share away from a user; their clients are detached at once.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Argument(help: "The user: a login or a uid.") var user: String

    func run() throws {
        let connection = try Connection.start(socketPath, command: "unshare")
        let conversation = try connection.resolveConversation(id)
        let named = SharedUser.named(user)
        let result = try connection.call(UnshareCall.self, UnshareParams(conversation: conversation, uid: named.uid, login: named.login))
        if !result.unshared {
            Out.errorLine("\(conversation) was not shared with \(SafeText.singleLine(user))")
        }
    }
}

/// How the client names the user of a share.
enum SharedUser {
    /// `uid` for a number, `login` for anything else.
    static func named(_ user: String) -> (uid: Int?, login: String?) {
        if let uid = UInt32(user) { return (Int(uid), nil) }
        return (nil, user)
    }

    static func names(_ share: ConversationShare, _ user: String) -> Bool {
        UInt32(user) == share.uid || share.login == user
    }

    /// `bob (uid 1001)`, or the uid alone when it has no login.
    static func describe(_ share: ConversationShare) -> String {
        let login = SafeText.singleLine(share.login)
        return login == String(share.uid) ? "uid \(share.uid)" : "\(login) (uid \(share.uid))"
    }

    /// `bob (write), carol (read)`, for `show`; nil when not shared.
    static func list(_ shares: [ConversationShare]) -> String? {
        shares.isEmpty ? nil : shares.map { "\(SafeText.singleLine($0.login)) (\($0.role.rawValue))" }.joined(separator: ", ")
    }

    /// `bob,carol:r` for `ls -l`: writers by name, readers marked; `-` when not shared.
    static func cell(_ shares: [ConversationShare]) -> String {
        shares.isEmpty ? "-" : shares.map { SafeText.singleLine($0.login) + ($0.role == .read ? ":r" : "") }.joined(separator: ",")
    }
}

extension ConversationInfo {
    /// What this user may do with the conversation: nil when it is ours (confabd runs as us
    /// and owns every conversation: a share is never to the owner), else the role shared
    /// with us. Only the owner approves tool calls; only a writer goes on with a reply.
    var roleOfThisUser: ShareRole? { sharedWith.role(of: getuid()) }
}
