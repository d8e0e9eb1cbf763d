import ConfabProtocol
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix
import Posix
import WebGateway

/// One browser page and its own connection to confabd: the page's actions become RPC calls,
/// checked first against what the page's token allows, and the daemon's notifications
/// become page events. The daemon connection is a NIO channel on the server's event loops,
/// read as an async sequence, so nothing here blocks a loop.
actor BrowserSession {
    enum Close: Error {
        case page(code: UInt16, reason: String)
    }

    private let daemonOut: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private let page: WebSocketOutboundWriter
    private let conversation: String?
    private let token: String
    private let store: AccessStore
    private let tickets: DownloadTickets
    private let logger: Logger
    private var access: WebAccess
    /// Frames the calls and reads what the daemon sends (`RPCClientCore`).
    private var core = RPCClientCore(maxLineBytes: 64 << 20)
    private var pending: [Int: CheckedContinuation<JSON, any Error>] = [:]
    /// Answers read before their call began to wait.
    private var early: [Int: Result<JSON, RPCError>] = [:]
    private var view: ConversationView?
    private var lastList: JSON?
    /// The list page's view of each listed conversation it follows.
    private var activity: [String: ListActivity] = [:]
    private var listed: [ConversationInfo] = []
    /// How many of the most recent conversations the list follows live.
    private static let followedConversations = 100
    private(set) var closing: Close?

    init(daemonOut: NIOAsyncChannelOutboundWriter<ByteBuffer>, page: WebSocketOutboundWriter, conversation: String?,
         access: WebAccess, token: String, store: AccessStore, tickets: DownloadTickets, logger: Logger) {
        self.daemonOut = daemonOut
        self.page = page
        self.conversation = conversation
        self.access = access
        self.token = token
        self.store = store
        self.tickets = tickets
        self.logger = logger
    }

    /// Runs until the page goes, the daemon goes, or the link stops working.
    static func run(socketPath: String, conversation: String?, access: WebAccess, token: String, name: String,
                    store: AccessStore, tickets: DownloadTickets, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter,
                    logger: Logger) async {
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            // Connected here (a Unix socket connects at once or fails) so that the kernel can
            // say who listens before anything is sent: only a daemon of this same user is
            // told what the pages type, and relayed to them. NIO then owns the descriptor.
            let fd = try UnixSocket.connect(to: socketPath)
            let peer: UnixSocket.PeerCredentials
            do { peer = try UnixSocket.peerCredentials(of: fd) } catch {
                Descriptor.close(fd)
                throw error
            }
            guard peer.uid == ProcessEnvironment.userID else {
                Descriptor.close(fd)
                logger.error("refusing \(socketPath): it is served by uid \(peer.uid) (pid \(peer.pid)), not by this user")
                try? await outbound.close(.unknown(1011), reason: "confabd's socket is served by another user")
                return
            }
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .withConnectedSocket(fd) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            logger.warning("cannot reach confabd at \(socketPath): \(error)")
            // 1013, try again later: the page reconnects by itself.
            try? await outbound.close(.unknown(1013), reason: "confabd is not running")
            return
        }
        do {
            try await channel.executeThenClose { daemonIn, daemonOut in
                let session = BrowserSession(daemonOut: daemonOut, page: outbound, conversation: conversation,
                                             access: access, token: token, store: store, tickets: tickets, logger: logger)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        do {
                            for try await buffer in daemonIn {
                                try await session.daemonBytes(Array(buffer.readableBytesView))
                            }
                            throw Close.page(code: 1012, reason: "confabd went away")
                        } catch {
                            await session.finish(error)
                            throw error
                        }
                    }
                    group.addTask {
                        do {
                            try await session.start(name: name)
                            for try await message in inbound.messages(maxSize: 1 << 20) {
                                guard case .text(let text) = message else { continue }
                                try await session.pageAction(text)
                            }
                        } catch {
                            await session.finish(error)
                            throw error
                        }
                    }
                    group.addTask {
                        do {
                            while true {
                                try await Task.sleep(for: .seconds(1))
                                try await session.tick()
                            }
                        } catch {
                            await session.finish(error)
                            throw error
                        }
                    }
                    defer { group.cancelAll() }
                    try await group.next()
                }
            }
        } catch {
            logger.debug("browser session ended: \(error)")
        }
    }

    /// Ends the session once, whoever noticed first: calls still waiting fail, and the page
    /// is told why with a close code (4403 the link no longer works, 4404 no such
    /// conversation, 4410 deleted or unshared: the page stops; anything else, it reconnects).
    func finish(_ error: any Error) async {
        failPending()
        guard closing == nil else { return }
        if case Close.page(let code, let reason) = error {
            closing = .page(code: code, reason: reason)
            try? await page.close(.unknown(code), reason: reason)
        } else if error is CancellationError {
            closing = .page(code: 1000, reason: "")
        } else {
            closing = .page(code: 1011, reason: "the gateway lost confabd")
            try? await page.close(.unknown(1011), reason: "the gateway lost confabd")
        }
    }

    // MARK: The daemon

    /// A method's typed call: its params written, its result read by their types.
    @discardableResult
    private func call<Call: RPCCall>(_: Call.Type, _ params: Call.Params) async throws -> Call.Result {
        try RPCClientCore.decode(Call.self, await send(core.request(Call.self, params)))
    }

    private func send(_ request: (id: Int, frame: [UInt8])) async throws -> JSON {
        let id = request.id
        try await daemonOut.write(ByteBuffer(bytes: request.frame))
        if let result = early.removeValue(forKey: id) { return try result.get() }
        // A daemon that never answers must not hold the page, or the gateway's shutdown,
        // forever: a cancelled session gives up its calls.
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { pending[id] = $0 }
        } onCancel: {
            Task { await self.abandon(id) }
        }
    }

    private func abandon(_ id: Int) {
        core.abandon(id)
        pending.removeValue(forKey: id)?.resume(throwing: CancellationError())
    }

    private func resolve(_ id: Int, _ result: Result<JSON, RPCError>) {
        if let waiter = pending.removeValue(forKey: id) {
            waiter.resume(with: result.mapError { $0 as any Error })
        } else {
            early[id] = result
        }
    }

    /// Bytes from the daemon, as they were read.
    func daemonBytes(_ bytes: [UInt8]) async throws {
        for event in try core.receive(bytes) {
            switch event {
            case .answer(let id, let result): resolve(id, result)
            // The gateway asks for no answer as bytes (`requestEncoded`): none can come.
            case .encodedAnswer: break
            case .fatal(let error): throw Close.page(code: 1011, reason: "confabd refused the gateway: \(error.message)")
            case .send(let frame): try await daemonOut.write(ByteBuffer(bytes: frame))
            case .notification(let notification): try await daemon(notification)
            }
        }
    }

    private func daemon(_ notification: ServerNotification) async throws {
            switch notification {
            case .serverStopping:
                throw Close.page(code: 1012, reason: "confabd is restarting")
            case .conversation(let id, let event) where conversation == nil:
                guard var entry = activity[id] else { return }
                // Only conversations this page lists are followed: the daemon lists a page
                // only what its link may see.
                if let title = listed.first(where: { $0.id == id })?.title,
                   let attention = ListAttention.event(event, conversation: id, title: title, owner: access == .owner) {
                    await show(attention)
                }
                if entry.apply(event) {
                    activity[id] = entry
                    await showList()
                }
            case .conversation(let id, let event):
                guard id == conversation, var view else { return }
                let events = view.apply(event)
                self.view = view
                for event in events where !event.isNull { await show(event) }
                if case .conversationDeleted = event { throw Close.page(code: 4410, reason: "The conversation was deleted.") }
                if case .conversationUnshared = event { throw Close.page(code: 4410, reason: "The conversation is no longer shared.") }
            }
    }

    private func show(_ event: JSON) async {
        try? await page.write(.text(event.text))
    }

    private func notice(_ text: String) async {
        await show(["type": "notice", "text": .string(text)])
    }

    // MARK: The page

    func start(name: String) async throws {
        let hello = try await call(HelloCall.self, DaemonHello.params(access: access, name: name))
        if let problem = DaemonHello.problem(with: hello, access: access) { throw Close.page(code: 1011, reason: problem) }
        if let conversation {
            let result: AttachResult
            do {
                result = try await call(AttachCall.self, AttachParams(conversation: conversation, history: 200))
            } catch let error as RPCError where error.code == RPCError.notFound {
                throw Close.page(code: 4404, reason: "No such conversation.")
            }
            var view = ConversationView(role: roleName)
            let state = view.load(result)
            self.view = view
            await show(state)
        } else {
            try await refreshList()
        }
    }

    private var roleName: String {
        switch access {
        case .owner: return "owner"
        case .share(let share): return share.role.rawValue
        }
    }

    private func refreshList() async throws {
        listed = try await call(ListCall.self, ListParams(limit: 200)).conversations
        // The most recent ones are followed (attached quietly: history 0, and nobody is
        // told); one that left the list, or was deleted, is let go.
        let followed = Set(listed.prefix(Self.followedConversations).map(\.id))
        for id in activity.keys where !followed.contains(id) {
            activity[id] = nil
            _ = try? await call(DetachCall.self, ConversationTarget(conversation: id))
        }
        for info in listed.prefix(Self.followedConversations) where activity[info.id] == nil {
            if let attached = try? await call(AttachCall.self, AttachParams(conversation: info.id, history: 0, quiet: true)) {
                activity[info.id] = ListActivity(attached)
            }
        }
        await showList()
    }

    private func showList() async {
        let list = ConversationView.listEvent(listed, activity: activity)
        if list != lastList {
            lastList = list
            await show(list)
        }
    }

    /// Once a second: the link must still work (revoked, expired, rotated: the page is
    /// closed), and the list page follows the conversations.
    func tick() async throws {
        guard let now = store.access(for: token), now == access || Self.sameShare(now, access) else {
            logger.info("closing a page whose link was revoked, expired or rotated")
            throw Close.page(code: 4403, reason: "This link no longer works.")
        }
        if conversation == nil { try await refreshList() }
    }

    private static func sameShare(_ left: WebAccess, _ right: WebAccess) -> Bool {
        if case .share(let a) = left, case .share(let b) = right { return a.id == b.id }
        return false
    }

    /// One action from the page: `{"op": "send"|"cancel"|"retry"|"continue"|"approve"|"rename"|"download", …}`,
    /// or from the list: `{"op": "create"|"rename"|"delete", …}`.
    func pageAction(_ text: String) async throws {
        guard let action = try? JSON.parse(text), let op = action["op"]?.string else { return }
        // The link is checked again at every action, not only at the upgrade.
        guard store.access(for: token) != nil else { throw Close.page(code: 4403, reason: "This link no longer works.") }
        guard let conversation else { return try await listAction(op, action) }
        let target = ConversationTarget(conversation: conversation)
        // Each action's typed params; its result is not read.
        let (method, params): (RPCMethod, JSON)
        switch op {
        case "send":
            guard let content = action["text"]?.string, !content.isEmpty else { return }
            (method, params) = (SendCall.method, SendParams(conversation: conversation, content: content).json)
        case "cancel": (method, params) = (CancelCall.method, CancelParams(conversation: conversation).json)
        case "retry": (method, params) = (RegenerateCall.method, target.json)
        case "continue": (method, params) = (ContinueCall.method, target.json)
        case "download":
            // A one-use address for one file of this conversation (Gateway, `/d/`): the page
            // cannot send its token with a download, and no cookie carries it.
            guard let message = action["message"]?.string, AttachmentDownload.isMessageID(message),
                  let index = action["index"]?.int, (0..<AttachmentLimits.maxCount).contains(index) else { return }
            let ticket = tickets.mint(token: token, conversation: conversation, message: message, index: index)
            await show(["type": "download", "url": .string("/d/" + ticket)])
            return
        case "approve":
            guard access.isOwner else {
                await notice("Only the owner can answer a tool call.")
                logger.info("refused a tool approval from a share link")
                return
            }
            guard let call = action["call"]?.string, let allow = action["allow"]?.bool else { return }
            (method, params) = (ApproveCall.method, ApproveParams(conversation: conversation, call: call, allow: allow).json)
        case "rename":
            // The owner's, as in the terminal (`conversation.rename` is an owner's method).
            guard access.isOwner else {
                await notice("Only the owner can rename the conversation.")
                logger.info("refused a rename from a share link")
                return
            }
            guard let title = action["title"]?.string, !title.isEmpty else { return }
            var rename = RenameParams()
            (rename.conversation, rename.title) = (conversation, title)
            (method, params) = (RenameCall.method, rename.json)
        default:
            return
        }
        guard access.canWrite else {
            await notice("This link is read-only.")
            logger.info("refused \(method.rawValue) from a read-only share link")
            return
        }
        do {
            _ = try await send(core.request(method, params))
        } catch let error as RPCError {
            await notice(error.message)
        }
    }

    /// The list's own actions: start, rename and delete a conversation. The owner's alone
    /// (a share link's page has no list, and the WebSocket without a conversation is the
    /// owner's only; checked here again all the same).
    private func listAction(_ op: String, _ action: JSON) async throws {
        guard access.isOwner else {
            logger.info("refused a list action (\(op)) from a share link")
            return
        }
        do {
            switch op {
            case "create":
                let id = try await call(CreateCall.self, CreateParams()).conversation.id
                guard ConversationID.isValid(id) else { return }
                await show(["type": "created", "conversation": .string(id)])
            case "rename":
                guard let id = action["conversation"]?.string, ConversationID.isValid(id),
                      let title = action["title"]?.string, !title.isEmpty else { return }
                var params = RenameParams()
                (params.conversation, params.title) = (id, title)
                try await call(RenameCall.self, params)
            case "delete":
                guard let id = action["conversation"]?.string, ConversationID.isValid(id) else { return }
                try await call(DeleteCall.self, ConversationTarget(conversation: id))
            default:
                return
            }
            try await refreshList()
        } catch let error as RPCError {
            await notice(error.message)
        }
    }

    func failPending() {
        for (_, waiter) in pending { waiter.resume(throwing: Close.page(code: 1011, reason: "confabd went away")) }
        pending = [:]
    }
}
