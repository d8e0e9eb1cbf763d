import ConfabProtocol

/// How often another user may come and go where the owner sees it: every attach it makes is
/// announced (`client.attached`), and so is the detach or disconnect that ends it. Without a
/// bound, a reader alternating `conversation.attach` and `conversation.detach` (each answered
/// at once, so the bound on unanswered requests never applies) fills the owner's screen with
/// joined/left lines and its connection's buffer. Each uid other than the owner's has a
/// bucket of `capacity` announcements, refilled by `refillPerSecond`; an attach takes two
/// (its join and, paid ahead, its leave), so a detach or a disconnect is always announced.
struct PresenceBudget {
    static let capacity = 20.0
    static let refillPerSecond = 1.0
    static let costOfAttach = 2.0

    private var tokens = capacity
    private var updatedMilliseconds: UInt64

    init(now: UInt64) { updatedMilliseconds = now }

    /// Takes one attach's worth when there is one; otherwise says how many whole seconds
    /// until there is.
    mutating func takeAttach(now: UInt64) -> Int? {
        let elapsed = Double(now &- updatedMilliseconds) / 1000
        tokens = min(Self.capacity, tokens + max(0, elapsed) * Self.refillPerSecond)
        updatedMilliseconds = now
        guard tokens >= Self.costOfAttach else {
            return max(1, Int(((Self.costOfAttach - tokens) / Self.refillPerSecond).rounded(.up)))
        }
        tokens -= Self.costOfAttach
        return nil
    }
}

extension Broker {
    /// Refuses an announced attach by another user past its budget (`-32004`).
    func spendPresence(of client: ClientSession) throws(RPCError) {
        guard !isOwner(client) else { return }
        // One budget per uid, and one per share link: every page of a link shares it.
        let key = client.link.map { "link:" + $0.id } ?? "uid:\(client.credentials.uid)"
        var budget = presenceBudgets[key] ?? PresenceBudget(now: loop.now)
        let wait = budget.takeAttach(now: loop.now)
        presenceBudgets[key] = budget
        if let wait {
            throw RPCError(code: RPCError.limitReached,
                           message: "attached and detached too often: try again in \(wait) s")
        }
    }
}
