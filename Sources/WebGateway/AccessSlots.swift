import Synchronization

/// How many file downloads the gateway serves at once. Each holds a whole file (up to an
/// image's 5 MiB) and a connection to confabd of its own while it runs, so without a bound a
/// share link's holder could make the gateway hold as much as they have requests in flight.
public final class DownloadSlots: Sendable {
    public let limit: Int
    private let taken = Atomic<Int>(0)

    public init(limit: Int) {
        precondition(limit > 0)
        self.limit = limit
    }

    /// Takes a slot, or says there is none (the caller answers 503 and takes nothing).
    public func take() -> Bool {
        if taken.add(1, ordering: .relaxed).newValue > limit {
            taken.subtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    /// Gives back a slot `take` gave.
    public func give() {
        taken.subtract(1, ordering: .relaxed)
    }

    public var inUse: Int { taken.load(ordering: .relaxed) }
}
