import Synchronization

/// One-use addresses for file downloads. A page's token never travels in a URL or a cookie,
/// and a browser cannot add a header to a download it starts, so the page asks over its
/// authenticated WebSocket for a ticket: a random name, good once, for one file, for a
/// minute, and only while the token it was made for still works. A page on another port
/// learns nothing from a ticket it never sees, and one it did see is spent or soon dead.
public final class DownloadTickets: Sendable {
    public struct Ticket: Equatable, Sendable {
        /// The token the page that asked holds (its access is checked again at use).
        public var token: String
        public var conversation: String
        public var message: String
        public var index: Int
        /// Seconds since the epoch after which it no longer works.
        public var expires: Int
    }

    public static let lifetimeSeconds = 60
    /// Tickets waiting to be used, at most: the oldest goes first past it.
    public let limit: Int
    private let state = Mutex<[(name: String, ticket: Ticket)]>([])

    public init(limit: Int = 256) {
        self.limit = limit
    }

    public func mint(token: String, conversation: String, message: String, index: Int,
                     now: Int = AccessStore.now()) -> String {
        let name = AccessStore.newToken()
        let ticket = Ticket(token: token, conversation: conversation, message: message, index: index,
                            expires: now + Self.lifetimeSeconds)
        state.withLock { tickets in
            tickets.removeAll { $0.ticket.expires <= now }
            if tickets.count >= limit { tickets.removeFirst(tickets.count - limit + 1) }
            tickets.append((name, ticket))
        }
        return name
    }

    /// The ticket's file, once: a second use, an unknown name or an expired ticket is nil.
    public func redeem(_ name: String, now: Int = AccessStore.now()) -> Ticket? {
        state.withLock { tickets in
            guard let index = tickets.firstIndex(where: { AccessStore.constantTimeEqual($0.name, name) }) else { return nil }
            let ticket = tickets.remove(at: index).ticket
            return ticket.expires > now ? ticket : nil
        }
    }

    public var waiting: Int { state.withLock { $0.count } }
}
