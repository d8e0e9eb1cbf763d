import Synchronization

/// Bounded places for what a browser holds open on the gateway: pages (each a WebSocket and
/// a connection to confabd of its own) or file downloads (each a whole file in memory, up to
/// an image's 5 MiB, until the last byte is written). Bounded in all and per share link, with
/// some places only the owner may take, so no link, nor all links together, can fill the
/// gateway or, through it, confabd's client slots, and lock the owner out.
public final class AccessSlots: Sendable {
    public let limit: Int
    public let perLink: Int
    public let ownerReserved: Int
    private let state = Mutex<(all: Int, links: [String: Int])>((0, [:]))

    public enum Refusal: Error, Equatable, CustomStringConvertible {
        /// Every place is taken (for a link: every place it may take).
        case full(Int)
        /// This link holds as many as one link may.
        case linkFull(Int)

        public var description: String {
            switch self {
            case .full(let limit): return "the gateway holds as many as it may (\(limit))"
            case .linkFull(let limit): return "this share link holds as many as one link may (\(limit))"
            }
        }
    }

    public init(limit: Int, perLink: Int, ownerReserved: Int) {
        precondition(limit > 0 && perLink > 0 && ownerReserved >= 0 && ownerReserved < limit)
        self.limit = limit
        self.perLink = perLink
        self.ownerReserved = ownerReserved
    }

    /// Takes a place for the owner (`link` nil) or for the share link with this id.
    public func take(link: String?) -> Refusal? {
        state.withLock { state in
            guard let link else {
                if state.all >= limit { return .full(limit) }
                state.all += 1
                return nil
            }
            if state.all >= limit - ownerReserved { return .full(limit - ownerReserved) }
            if state.links[link, default: 0] >= perLink { return .linkFull(perLink) }
            state.all += 1
            state.links[link, default: 0] += 1
            return nil
        }
    }

    /// Gives back a place `take` gave.
    public func give(link: String?) {
        state.withLock { state in
            state.all -= 1
            if let link {
                let left = state.links[link, default: 1] - 1
                state.links[link] = left > 0 ? left : nil
            }
        }
    }

    public var inUse: Int { state.withLock { $0.all } }

    public func inUse(link: String) -> Int { state.withLock { $0.links[link, default: 0] } }

    /// A place held until `release`, or until the hold itself goes (a response dropped
    /// unwritten): it is given back exactly once either way.
    public func hold(link: String?) -> Result<Hold, Refusal> {
        if let refusal = take(link: link) { return .failure(refusal) }
        return .success(Hold(slots: self, link: link))
    }

    public final class Hold: Sendable {
        private let slots: AccessSlots
        private let link: String?
        private let released = Atomic<Bool>(false)

        init(slots: AccessSlots, link: String?) {
            self.slots = slots
            self.link = link
        }

        public func release() {
            if !released.exchange(true, ordering: .relaxed) { slots.give(link: link) }
        }

        deinit { release() }
    }
}
