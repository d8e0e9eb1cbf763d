// Every method's params and result (docs/protocol.md, "Methods"), one typed call each: the
// daemon reads the params and writes the result, a client writes the params and reads the
// result, through the same description of their fields.

/// One method: its params and its result.
public protocol RPCCall {
    associatedtype Params: RPCObject
    associatedtype Result: RPCObject
    static var method: RPCMethod { get }
}

extension RPCMethod {
    /// The method's typed call: the switch is exhaustive, so a method without one does not compile.
    public var call: any RPCCall.Type {
        switch self {
        case .hello: HelloCall.self
        case .status: StatusCall.self
        case .conversationCreate: CreateCall.self
        case .conversationList: ListCall.self
        case .conversationGet: GetCall.self
        case .conversationRename: RenameCall.self
        case .conversationDelete: DeleteCall.self
        case .conversationAttach: AttachCall.self
        case .conversationDetach: DetachCall.self
        case .conversationHistory: HistoryCall.self
        case .messageSend: SendCall.self
        case .generationCancel: CancelCall.self
        case .messageRegenerate: RegenerateCall.self
        case .messageEdit: EditCall.self
        case .messageContinue: ContinueCall.self
        case .conversationFork: ForkCall.self
        case .conversationSearch: SearchCall.self
        case .modelsList: ModelsListCall.self
        case .profilesList: ProfilesListCall.self
        case .conversationConfigure: ConfigureCall.self
        case .toolApprove: ApproveCall.self
        case .conversationShare: ShareCall.self
        case .conversationUnshare: UnshareCall.self
        case .blobPut: BlobPutCall.self
        case .attachmentGet: AttachmentGetCall.self
        case .toolsList: ToolsListCall.self
        case .mcpRestart: MCPRestartCall.self
        case .usageSummary: UsageCall.self
        case .conversationCompact: CompactCall.self
        case .conversationUncompact: UncompactCall.self
        }
    }
}

public enum HelloCall: RPCCall { public typealias Params = HelloParams; public typealias Result = HelloResult; public static let method = RPCMethod.hello }
public enum StatusCall: RPCCall { public typealias Params = NoParams; public typealias Result = StatusResult; public static let method = RPCMethod.status }
public enum CreateCall: RPCCall { public typealias Params = CreateParams; public typealias Result = ConversationResult; public static let method = RPCMethod.conversationCreate }
public enum ListCall: RPCCall { public typealias Params = ListParams; public typealias Result = ListResult; public static let method = RPCMethod.conversationList }
public enum GetCall: RPCCall { public typealias Params = ConversationTarget; public typealias Result = ConversationResult; public static let method = RPCMethod.conversationGet }
public enum RenameCall: RPCCall { public typealias Params = RenameParams; public typealias Result = ConversationResult; public static let method = RPCMethod.conversationRename }
public enum DeleteCall: RPCCall { public typealias Params = ConversationTarget; public typealias Result = DeleteResult; public static let method = RPCMethod.conversationDelete }
public enum AttachCall: RPCCall { public typealias Params = AttachParams; public typealias Result = AttachResult; public static let method = RPCMethod.conversationAttach }
public enum DetachCall: RPCCall { public typealias Params = ConversationTarget; public typealias Result = DetachResult; public static let method = RPCMethod.conversationDetach }
public enum HistoryCall: RPCCall { public typealias Params = HistoryParams; public typealias Result = HistoryResult; public static let method = RPCMethod.conversationHistory }
public enum SendCall: RPCCall { public typealias Params = SendParams; public typealias Result = SendResult; public static let method = RPCMethod.messageSend }
public enum CancelCall: RPCCall { public typealias Params = CancelParams; public typealias Result = CancelResult; public static let method = RPCMethod.generationCancel }
public enum RegenerateCall: RPCCall { public typealias Params = ConversationTarget; public typealias Result = RegenerateResult; public static let method = RPCMethod.messageRegenerate }
public enum EditCall: RPCCall { public typealias Params = EditParams; public typealias Result = EditResult; public static let method = RPCMethod.messageEdit }
public enum ContinueCall: RPCCall { public typealias Params = ConversationTarget; public typealias Result = ContinueResult; public static let method = RPCMethod.messageContinue }
public enum ForkCall: RPCCall { public typealias Params = ForkParams; public typealias Result = ForkResult; public static let method = RPCMethod.conversationFork }
public enum SearchCall: RPCCall { public typealias Params = SearchParams; public typealias Result = SearchResult; public static let method = RPCMethod.conversationSearch }
public enum ModelsListCall: RPCCall { public typealias Params = ModelsListParams; public typealias Result = ModelsListResult; public static let method = RPCMethod.modelsList }
public enum ProfilesListCall: RPCCall { public typealias Params = NoParams; public typealias Result = ProfilesListResult; public static let method = RPCMethod.profilesList }
public enum ConfigureCall: RPCCall { public typealias Params = ConfigureParams; public typealias Result = ConversationResult; public static let method = RPCMethod.conversationConfigure }
public enum ApproveCall: RPCCall { public typealias Params = ApproveParams; public typealias Result = ApproveResult; public static let method = RPCMethod.toolApprove }
public enum ShareCall: RPCCall { public typealias Params = ShareParams; public typealias Result = ShareResult; public static let method = RPCMethod.conversationShare }
public enum UnshareCall: RPCCall { public typealias Params = UnshareParams; public typealias Result = UnshareResult; public static let method = RPCMethod.conversationUnshare }
public enum BlobPutCall: RPCCall { public typealias Params = BlobPutParams; public typealias Result = BlobPutResult; public static let method = RPCMethod.blobPut }
public enum AttachmentGetCall: RPCCall { public typealias Params = AttachmentGetParams; public typealias Result = AttachmentGetResult; public static let method = RPCMethod.attachmentGet }
public enum ToolsListCall: RPCCall { public typealias Params = ToolsListParams; public typealias Result = ToolsListResult; public static let method = RPCMethod.toolsList }
public enum UsageCall: RPCCall { public typealias Params = UsageParams; public typealias Result = UsageResult; public static let method = RPCMethod.usageSummary }
public enum MCPRestartCall: RPCCall { public typealias Params = MCPRestartParams; public typealias Result = MCPRestartResult; public static let method = RPCMethod.mcpRestart }

// MARK: - Params shared by several methods

/// `{}`: a method that takes no params.
public struct NoParams: RPCObject {
    public init() {}
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {}
}

/// `{conversation}`: a method whose only param is the conversation it acts on.
public struct ConversationTarget: RPCObject {
    public var conversation = ""
    public init() {}
    public init(conversation: String) { self.conversation = conversation }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.string("conversation", &conversation) }
}

/// `{conversation}`: a conversation as it is now.
public struct ConversationResult: RPCObject {
    public var conversation = ConversationInfo(id: "", title: "", created: Timestamp(milliseconds: 0), updated: Timestamp(milliseconds: 0),
                                                model: "", system: nil, messageCount: 0)
    public init() {}
    public init(conversation: ConversationInfo) { self.conversation = conversation }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.value("conversation", &conversation) }
}

// MARK: - hello, status

/// A share link a gateway's connection relays: `{id, conversation, role}`.
public struct LinkDeclaration: RPCFieldValue {
    public var id: String
    public var conversation: String
    public var role: ShareRole

    public init(id: String, conversation: String, role: ShareRole) {
        self.id = id
        self.conversation = conversation
        self.role = role
    }

    public var json: JSON { ["id": .string(id), "conversation": .string(conversation), "role": .string(role.rawValue)] }

    public init(field: JSON, key: String) throws(RPCError) {
        guard case .object = field, let id = field["id"]?.string, let conversation = field["conversation"]?.string,
              let role = field["role"]?.string.flatMap(ShareRole.init(rawValue:)) else {
            throw .invalidParams("parameter \"\(key)\" must be {\"id\", \"conversation\", \"role\": \"read\" or \"write\"}")
        }
        self.init(id: id, conversation: conversation, role: role)
    }
}

public struct HelloParams: RPCObject {
    /// The program (`confab-attach`).
    public var client: String?
    /// The display name others see.
    public var name: String?
    public var gateway: Bool?
    public var link: LinkDeclaration?
    public init() {}
    public init(client: String?, name: String? = nil, gateway: Bool? = nil, link: LinkDeclaration? = nil) {
        self.client = client
        self.name = name
        self.gateway = gateway
        self.link = link
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("client", &client)
        try f.string("name", &name)
        try f.bool("gateway", &gateway)
        try f.value("link", &link)
    }
}

/// The caller as the daemon sees it (`hello`'s `user`).
public struct HelloUser: RPCNestedObject {
    public var uid = 0
    public var login = ""
    public var name = ""
    public var link: LinkDeclaration?
    public init() {}
    public init(uid: Int, login: String, name: String, link: LinkDeclaration?) {
        self.uid = uid
        self.login = login
        self.name = name
        self.link = link
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.int("uid", &uid)
        try f.string("login", &login)
        try f.string("name", &name)
        try f.value("link", &link)
    }
}

/// `hello`'s answer.
public struct HelloResult: RPCObject {
    public var server = "confabd"
    public var version = ""
    public var protocolVersion = ProtocolVersion.current
    public var clientID = ""
    public var user = HelloUser()
    public init() {}
    /// Our name as others see it.
    public var name: String? { user.name.isEmpty ? nil : user.name }

    public init(version: String, clientID: String, user: HelloUser) {
        self.version = version
        self.clientID = clientID
        self.user = user
    }

    /// Read as a client reads it: an answer it cannot read is an empty one.
    public init(json: JSON) { self = (try? Self(decoding: json)) ?? Self() }

    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("server", &server)
        try f.string("version", &version)
        try f.int("protocol", &protocolVersion)
        try f.string("client_id", &clientID)
        try f.value("user", &user)
    }
}

public struct StatusResult: RPCObject {
    public var server = "confabd"
    public var version = ""
    public var protocolVersion = ProtocolVersion.current
    public var uptimeSeconds = 0
    public var conversations = 0
    public var clients = 0
    /// Replies in flight.
    public var streams = 0
    /// Sends waiting behind them.
    public var queued = 0
    public var searches = 0
    public init() {}
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("server", &server)
        try f.string("version", &version)
        try f.int("protocol", &protocolVersion)
        try f.int("uptime_seconds", &uptimeSeconds)
        try f.int("conversations", &conversations)
        try f.int("clients", &clients)
        try f.int("streams", &streams)
        try f.int("queued", &queued)
        try f.int("searches", &searches)
    }
}

// MARK: - Conversations

/// `conversation.create`: every field optional, each one a choice over the profile's.
public struct CreateParams: RPCObject {
    public var title: String?
    public var system: String?
    public var model: String?
    public var provider: String?
    public var profile: String?
    public var params: SamplingParameters?
    public init() {}
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("title", &title)
        try f.string("profile", &profile)
        try f.string("provider", &provider)
        try f.string("system", &system)
        try f.string("model", &model)
        try f.value("params", &params)
    }
}

public struct ListParams: RPCObject {
    public var limit: Int?
    public init() {}
    public init(limit: Int?) { self.limit = limit }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.int("limit", &limit, in: 1...10_000) }
}

public struct ListResult: RPCObject {
    public var conversations: [ConversationInfo] = []
    public init() {}
    public init(conversations: [ConversationInfo]) { self.conversations = conversations }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.values("conversations", &conversations) }
}

public struct RenameParams: RPCObject {
    public var conversation = ""
    public var title = ""
    public init() {}
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.string("title", &title)
    }
}

/// `conversation.configure`: what to change; a field left out stays as it is.
public struct ConfigureParams: RPCObject {
    public var conversation = ""
    public var profile: String?
    public var model: String?
    /// nil: left as it is; `""` (given as `""` or null): no system prompt from now on.
    public var system: String?
    public var params: SamplingParameters?
    public init() {}
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.string("profile", &profile)
        try f.string("model", &model)
        let given = f.isPresent("system")
        try f.string("system", &system)
        if f.isReading, given, system == nil { system = "" }
        try f.value("params", &params)
    }
}

public struct DeleteResult: RPCObject {
    public var deleted = ""
    public init() {}
    public init(deleted: String) { self.deleted = deleted }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.string("deleted", &deleted) }
}

public struct AttachParams: RPCObject {
    public var conversation = ""
    /// How many of the last messages (default 50).
    public var history: Int?
    public var quiet: Bool?
    public init() {}
    public init(conversation: String, history: Int? = nil, quiet: Bool? = nil) {
        self.conversation = conversation
        self.history = history
        self.quiet = quiet
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.int("history", &history, in: 0...f.bounds.maxHistory)
        try f.bool("quiet", &quiet)
    }
}

/// `conversation.attach`'s answer.
public struct AttachResult: RPCObject {
    public var conversation: ConversationInfo?
    /// The last messages asked for, oldest first, the reply in flight excluded.
    public var messages: [Message] = []
    /// The reply in flight (status `streaming`, its text so far), unless its tool calls run.
    public var pending: Message?
    /// The tool messages of the reply in flight whose calls have not ended.
    public var tools: [Message] = []
    /// The other clients attached.
    public var clients: [ClientInfo] = []
    /// The summary in force (`conversation.compact`), if any: where it stands among the messages.
    public var compaction: Compaction?
    public init() {}

    public init(conversation: ConversationInfo, messages: [Message], pending: Message?, tools: [Message], clients: [ClientInfo],
                compaction: Compaction? = nil) {
        self.compaction = compaction
        self.conversation = conversation
        self.messages = messages
        self.pending = pending
        self.tools = tools
        self.clients = clients
    }

    /// Read as a client reads it: an answer it cannot read is an empty one.
    public init(json: JSON) { self = (try? Self(decoding: json)) ?? Self() }

    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.value("conversation", &conversation)
        try f.knownValues("messages", &messages)
        try f.nullableValue("pending", &pending)
        try f.knownValues("tools", &tools)
        try f.knownValues("clients", &clients)
        try f.value("compaction", &compaction)
    }
}

public struct DetachResult: RPCObject {
    /// False when it was not attached.
    public var detached = false
    public init() {}
    public init(detached: Bool) { self.detached = detached }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.bool("detached", &detached) }
}

public struct HistoryParams: RPCObject {
    public var conversation = ""
    /// Messages older than this one (default: the newest).
    public var before: String?
    public var limit: Int?
    public init() {}
    public init(conversation: String, before: String?, limit: Int?) {
        self.conversation = conversation
        self.before = before
        self.limit = limit
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.int("limit", &limit, in: 1...f.bounds.maxHistory)
        try f.string("before", &before)
    }
}

public struct HistoryResult: RPCObject {
    public var messages: [Message] = []
    /// Older ones exist.
    public var more = false
    /// The summary in force (`conversation.compact`), if any.
    public var compaction: Compaction?
    public init() {}
    public init(messages: [Message], more: Bool, compaction: Compaction? = nil) {
        self.messages = messages
        self.more = more
        self.compaction = compaction
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.knownValues("messages", &messages)
        try f.bool("more", &more)
        try f.value("compaction", &compaction)
    }
}

// MARK: - Messages

/// A file a message names: one the connection stored with `blob.put`.
public struct AttachmentRef: Equatable, Sendable {
    public var name: String
    public var sha256: String

    public init(name: String, sha256: String) {
        self.name = name
        self.sha256 = sha256
    }

    public var json: JSON { ["name": .string(name), "sha256": .string(sha256)] }

    /// `attachments` as `message.send` takes it: an array of at most `AttachmentLimits.maxCount`.
    static func list(from value: JSON) throws(RPCError) -> [AttachmentRef] {
        guard case .array(let items) = value else {
            throw .invalidParams("parameter \"attachments\" must be an array of {name, sha256}, got \(value.typeName)")
        }
        guard items.count <= AttachmentLimits.maxCount else {
            throw RPCError(code: RPCError.limitReached, message: "too many attachments: at most \(AttachmentLimits.maxCount) on one message")
        }
        var refs: [AttachmentRef] = []
        for (index, item) in items.enumerated() {
            let at = "attachments[\(index)]"
            guard case .object = item else { throw .invalidParams("parameter \"\(at)\" must be an object {name, sha256}") }
            guard let name = item["name"]?.string else { throw .invalidParams("parameter \"\(at).name\" must be a string") }
            guard let digest = item["sha256"]?.string else { throw .invalidParams("parameter \"\(at).sha256\" must be 64 lowercase hex digits") }
            refs.append(AttachmentRef(name: name, sha256: digest))
        }
        return refs
    }
}

public struct SendParams: RPCObject {
    public var conversation = ""
    public var content = ""
    public var attachments: [AttachmentRef]?
    public init() {}
    public init(conversation: String, content: String, attachments: [AttachmentRef]? = nil) {
        self.conversation = conversation
        self.content = content
        self.attachments = attachments
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.string("content", &content)
        var raw = attachments.map { JSON.array($0.map(\.json)) }
        f.json("attachments", &raw)
        if f.isReading { attachments = try raw.map { value throws(RPCError) in try AttachmentRef.list(from: value) } }
    }
}

/// `message.send`'s answer: the message stored and its reply's id.
public struct SendResult: RPCObject {
    public var message = Message(id: "", conversation: "", role: .user, content: "", status: .complete, created: Timestamp(milliseconds: 0))
    public var reply = ""
    public init() {}
    public init(message: Message, reply: String) {
        self.message = message
        self.reply = reply
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.value("message", &message)
        try f.string("reply", &reply)
    }
}

public struct CancelParams: RPCObject {
    public var conversation = ""
    /// Only this reply (and its chain); without it, the reply streaming.
    public var message: String?
    public init() {}
    public init(conversation: String, message: String? = nil) {
        self.conversation = conversation
        self.message = message
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.string("message", &message)
    }
}

/// `generation.cancel`'s answer: the reply stopped, or nil when nothing was streaming.
public struct CancelResult: RPCObject {
    public var cancelled: String?
    public init() {}
    public init(cancelled: String?) { self.cancelled = cancelled }
    /// Read as a client reads it: an answer it cannot read cancelled nothing.
    public init(json: JSON) { self = (try? Self(decoding: json)) ?? Self() }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.nullableString("cancelled", &cancelled) }
}

public struct RegenerateResult: RPCObject {
    public var reply = ""
    /// The reply it replaces.
    public var replaces = ""
    public init() {}
    public init(reply: String, replaces: String) {
        self.reply = reply
        self.replaces = replaces
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("reply", &reply)
        try f.string("replaces", &replaces)
    }
}

public struct EditParams: RPCObject {
    public var conversation = ""
    public var message = ""
    public var content = ""
    public init() {}
    public init(conversation: String, message: String, content: String) {
        self.conversation = conversation
        self.message = message
        self.content = content
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.string("message", &message)
        try f.string("content", &content)
    }
}

public struct EditResult: RPCObject {
    public var message = SendResult().message
    public var reply = ""
    public var replaces = ""
    public init() {}
    public init(message: Message, reply: String, replaces: String) {
        self.message = message
        self.reply = reply
        self.replaces = replaces
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.value("message", &message)
        try f.string("reply", &reply)
        try f.string("replaces", &replaces)
    }
}

public struct ContinueResult: RPCObject {
    public var reply = ""
    public init() {}
    public init(reply: String) { self.reply = reply }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.string("reply", &reply) }
}

public struct ForkParams: RPCObject {
    public var conversation = ""
    /// The last message copied (default: all).
    public var at: String?
    public var title: String?
    public init() {}
    public init(conversation: String, at: String? = nil, title: String? = nil) {
        self.conversation = conversation
        self.at = at
        self.title = title
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.string("at", &at)
        try f.string("title", &title)
    }
}

public struct ForkResult: RPCObject {
    public var conversation = ConversationResult().conversation
    /// The reply the fork answers its last message with, when it ends with one of yours.
    public var reply: String?
    public init() {}
    public init(conversation: ConversationInfo, reply: String?) {
        self.conversation = conversation
        self.reply = reply
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.value("conversation", &conversation)
        try f.string("reply", &reply)
    }
}

// MARK: - Search, models, profiles

public struct SearchParams: RPCObject {
    public var query = ""
    public var limit: Int?
    /// Only this conversation.
    public var conversation: String?
    public init() {}
    public init(query: String, limit: Int? = nil, conversation: String? = nil) {
        self.query = query
        self.limit = limit
        self.conversation = conversation
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("query", &query)
        try f.int("limit", &limit, in: 1...1000)
        try f.string("conversation", &conversation)
    }
}

/// One message a search found.
public struct FoundMessage: RPCNestedObject {
    public var conversation = ""
    public var title = ""
    public var message = ""
    public var role = Role.user
    public var created = Timestamp(milliseconds: 0)
    public var snippet = ""
    public init() {}
    public init(conversation: String, title: String, message: String, role: Role, created: Timestamp, snippet: String) {
        self.conversation = conversation
        self.title = title
        self.message = message
        self.role = role
        self.created = created
        self.snippet = snippet
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.string("title", &title)
        try f.string("message", &message)
        var roleName = role.rawValue
        try f.string("role", &roleName)
        var createdText = created.description
        try f.string("created", &createdText)
        if f.isReading {
            guard let read = Role(rawValue: roleName) else { throw .invalidParams("parameter \"role\" is not a role") }
            guard let time = Timestamp(rfc3339: createdText) else { throw .invalidParams("parameter \"created\" is not a time") }
            role = read
            created = time
        }
        try f.string("snippet", &snippet)
    }
}

public struct SearchResult: RPCObject {
    /// Newest first.
    public var hits: [FoundMessage] = []
    public init() {}
    public init(hits: [FoundMessage]) { self.hits = hits }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.values("hits", &hits) }
}

public struct ModelsListParams: RPCObject {
    /// Only this provider.
    public var provider: String?
    public init() {}
    public init(provider: String?) { self.provider = provider }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.string("provider", &provider) }
}

/// A model a provider offers.
public struct ListedModel: RPCNestedObject {
    public var id = ""
    public var provider = ""
    public init() {}
    public init(id: String, provider: String) {
        self.id = id
        self.provider = provider
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("id", &id)
        try f.string("provider", &provider)
    }
}

/// A provider that could not list its models: the error's fields beside its name.
public struct ModelListingError: RPCFieldValue {
    public var provider: String
    public var error: MessageError

    public init(provider: String, error: MessageError) {
        self.provider = provider
        self.error = error
    }

    public var json: JSON {
        var entry = error.json.object ?? [:]
        entry["provider"] = .string(provider)
        return .object(entry)
    }

    public init(field: JSON, key: String) throws(RPCError) {
        guard let provider = field["provider"]?.string, let error = MessageError(json: field) else {
            throw .invalidParams("parameter \"\(key)\" must be {provider, code, message, status?}")
        }
        self.init(provider: provider, error: error)
    }
}

public struct ModelsListResult: RPCObject {
    public var models: [ListedModel] = []
    public var errors: [ModelListingError] = []
    public init() {}
    public init(models: [ListedModel], errors: [ModelListingError]) {
        self.models = models
        self.errors = errors
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.values("models", &models)
        try f.values("errors", &errors)
    }
}

/// A configured profile.
public struct ListedProfile: RPCNestedObject {
    public var name = ""
    public var provider = ""
    public var model: String?
    public var system: String?
    public var params = SamplingParameters()
    public var isDefault = false
    public init() {}
    public init(name: String, provider: String, model: String?, system: String?, params: SamplingParameters, isDefault: Bool) {
        self.name = name
        self.provider = provider
        self.model = model
        self.system = system
        self.params = params
        self.isDefault = isDefault
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("name", &name)
        try f.string("provider", &provider)
        try f.string("model", &model)
        try f.string("system", &system)
        try f.value("params", &params)
        try f.bool("default", &isDefault)
    }
}

public struct ProfilesListResult: RPCObject {
    /// By name.
    public var profiles: [ListedProfile] = []
    public init() {}
    public init(profiles: [ListedProfile]) { self.profiles = profiles }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.values("profiles", &profiles) }
}

// MARK: - Tools

public struct ApproveParams: RPCObject {
    public var conversation = ""
    public var call = ""
    public var allow = false
    public init() {}
    public init(conversation: String, call: String, allow: Bool) {
        self.conversation = conversation
        self.call = call
        self.allow = allow
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.string("call", &call)
        try f.bool("allow", &allow)
    }
}

public struct ApproveResult: RPCObject {
    public var call = ""
    public var allowed = false
    public init() {}
    public init(call: String, allowed: Bool) {
        self.call = call
        self.allowed = allowed
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("call", &call)
        try f.bool("allowed", &allowed)
    }
}

public struct ToolsListParams: RPCObject {
    /// Only what this profile offers.
    public var profile: String?
    /// Start every server listed that is not ready, and answer once each is ready or failed.
    public var start: Bool?
    public init() {}
    public init(profile: String?, start: Bool?) {
        self.profile = profile
        self.start = start
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("profile", &profile)
        try f.bool("start", &start)
    }
}

public struct MCPRestartParams: RPCObject {
    public var server = ""
    public init() {}
    public init(server: String) { self.server = server }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.string("server", &server) }
}

// MARK: - Sharing

/// The user a share names: exactly one of `uid` and `login`.
public struct ShareParams: RPCObject {
    public var conversation = ""
    public var uid: Int?
    public var login: String?
    public var role = ""
    public init() {}
    public init(conversation: String, uid: Int? = nil, login: String? = nil, role: ShareRole) {
        self.conversation = conversation
        self.uid = uid
        self.login = login
        self.role = role.rawValue
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.int("uid", &uid, in: 0...Int(UInt32.max - 1))
        try f.string("login", &login)
        try f.string("role", &role)
    }
}

public struct ShareResult: RPCObject {
    public var conversation = ConversationResult().conversation
    /// `access.allow_uids` lets the user connect now.
    public var allowed = false
    public init() {}
    public init(conversation: ConversationInfo, allowed: Bool) {
        self.conversation = conversation
        self.allowed = allowed
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.value("conversation", &conversation)
        try f.bool("allowed", &allowed)
    }
}

public struct UnshareParams: RPCObject {
    public var conversation = ""
    public var uid: Int?
    public var login: String?
    public init() {}
    public init(conversation: String, uid: Int? = nil, login: String? = nil) {
        self.conversation = conversation
        self.uid = uid
        self.login = login
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.int("uid", &uid, in: 0...Int(UInt32.max - 1))
        try f.string("login", &login)
    }
}

public struct UnshareResult: RPCObject {
    public var conversation = ConversationResult().conversation
    /// False when the user had no share: nothing was written.
    public var unshared = false
    public init() {}
    public init(conversation: ConversationInfo, unshared: Bool) {
        self.conversation = conversation
        self.unshared = unshared
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.value("conversation", &conversation)
        try f.bool("unshared", &unshared)
    }
}

// MARK: - Files

public struct BlobPutParams: RPCObject {
    /// The upload this chunk continues (none: a new one).
    public var upload: String?
    /// Base64.
    public var data = ""
    public var isFinal: Bool?
    public init() {}
    public init(upload: String?, data: String, isFinal: Bool?) {
        self.upload = upload
        self.data = data
        self.isFinal = isFinal
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("data", &data)
        try f.bool("final", &isFinal)
        try f.string("upload", &upload)
    }
}

/// A file stored: `blob.put`'s final answer (`{type, size, sha256}`, no name yet).
public struct StoredFile: RPCNestedObject {
    public var type = AttachmentType.text
    public var size = 0
    public var sha256 = ""
    public init() {}
    public init(type: AttachmentType, size: Int, sha256: String) {
        self.type = type
        self.size = size
        self.sha256 = sha256
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        var typeName = type.rawValue
        try f.string("type", &typeName)
        if f.isReading {
            guard let read = AttachmentType(rawValue: typeName) else { throw .invalidParams("parameter \"type\" is not a file type") }
            type = read
        }
        try f.int("size", &size, in: 0...Int.max)
        try f.string("sha256", &sha256)
    }
}

/// `blob.put`'s answer: a chunk's (`upload`, `size` so far) or the final one's (`attachment`).
public struct BlobPutResult: RPCObject {
    public var upload: String?
    public var size: Int?
    public var attachment: StoredFile?
    public init() {}
    public init(upload: String, size: Int) {
        self.upload = upload
        self.size = size
    }
    public init(attachment: StoredFile) { self.attachment = attachment }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("upload", &upload)
        try f.int("size", &size)
        try f.value("attachment", &attachment)
    }
}

public struct AttachmentGetParams: RPCObject {
    public var conversation = ""
    public var message = ""
    public var index = 0
    public var offset: Int?
    public init() {}
    public init(conversation: String, message: String, index: Int, offset: Int?) {
        self.conversation = conversation
        self.message = message
        self.index = index
        self.offset = offset
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.string("message", &message)
        try f.int("index", &index, in: 0...Int(Int32.max))
        try f.int("offset", &offset, in: 0...Int.max)
    }
}

public struct AttachmentGetResult: RPCObject {
    public var attachment = Attachment(name: "", type: .text, size: 0, sha256: "")
    public var offset = 0
    /// Base64 of up to 1 MiB from `offset`.
    public var data = ""
    public var more = false
    public init() {}
    public init(attachment: Attachment, offset: Int, data: String, more: Bool) {
        self.attachment = attachment
        self.offset = offset
        self.data = data
        self.more = more
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.value("attachment", &attachment)
        try f.int("offset", &offset)
        try f.string("data", &data)
        try f.bool("more", &more)
    }
}
