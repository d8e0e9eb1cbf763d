import ConfabProtocol
import EventLoop
import ServiceSettings
import Tools
import Upstream

/// Each provider's model listing for `models.list`: fetched once for everyone who asks while it
/// is on its way, and kept for a minute, so a client that lists models on every start does not
/// turn into a request per start. Failures are not kept: asking again tries again.
final class ModelCatalog {
    static let freshMilliseconds: UInt64 = 60_000

    private struct Entry {
        var provider: Provider
        var fetchedAt: UInt64
        var ids: [String]
    }

    /// One fetch and whoever is waiting for it.
    private final class Pending {
        let provider: Provider
        var waiters: [(ModelListing) -> Void] = []
        var request: (any UpstreamCall)?
        init(provider: Provider) { self.provider = provider }
    }

    private let loop: Loop
    private let upstream: any ReplyUpstream
    private var cached: [String: Entry] = [:]
    private var inFlight: [String: Pending] = [:]
    /// Told about each fetch that failed, for the daemon's log.
    var onFailure: ((String, MessageError) -> Void)?
    /// The settings in force: their secrets are redacted from every failure, which may quote
    /// the key the listing was asked with.
    private let settings: CurrentSettings
    private var secrets: SecretRedactor { settings.secrets }
    /// How to answer each `models.list` still waiting, should the daemon stop first.
    private var waitingCalls: [Int: (RPCError) -> Void] = [:]
    private var nextCall = 0

    init(loop: Loop, upstream: any ReplyUpstream, settings: CurrentSettings) {
        self.loop = loop
        self.upstream = upstream
        self.settings = settings
    }

    /// `provider`'s listing: at once when a fresh one is kept, else when the fetch ends.
    func listing(of provider: Provider, _ done: @escaping (ModelListing) -> Void) {
        let name = provider.name
        // A provider the config has changed since (a reload) is asked again, at its new address.
        if let entry = cached[name], entry.provider == provider, loop.now - entry.fetchedAt < Self.freshMilliseconds {
            done(.success(entry.ids))
            return
        }
        if let pending = inFlight[name], pending.provider == provider {
            pending.waiters.append(done)
            return
        }
        let pending = Pending(provider: provider)
        pending.waiters.append(done)
        inFlight[name] = pending
        pending.request = upstream.startModelListing(of: provider) { [unowned self] result in
            let result = result.mapError(secrets.redacting)
            // A fetch for a configuration replaced meanwhile still answers its own callers, but
            // neither its answer nor its place is kept.
            if inFlight[name] === pending {
                inFlight[name] = nil
                if case .success(let ids) = result { cached[name] = Entry(provider: provider, fetchedAt: loop.now, ids: ids) }
            }
            if case .failure(let error) = result { onFailure?(name, error) }
            pending.request = nil
            for waiter in pending.waiters { waiter(result) }
        }
    }

    /// Notes a call waiting on listings; `abandon` answers it if the daemon stops first.
    func track(_ abandon: @escaping (RPCError) -> Void) -> Int {
        nextCall += 1
        waitingCalls[nextCall] = abandon
        return nextCall
    }

    func untrack(_ call: Int) { waitingCalls[call] = nil }

    /// At shutdown: stops every fetch and gives each waiting call `error`, so its client's
    /// answers are not held up behind it while the daemon waits for them to drain.
    func abandonAll(_ error: RPCError) {
        for pending in inFlight.values { pending.request?.cancel() }
        inFlight = [:]
        let calls = waitingCalls
        waitingCalls = [:]
        for abandon in calls.values { abandon(error) }
    }
}
