import EventLoop
import Posix

/// A run of large answers (an export's history pages, a MiB or more each, one after another)
/// is served from reused heap memory, and what it freed is given back once it is over.
///
/// confabd keeps every block of 128 KiB or more mapped on its own and unmapped when freed
/// (`LargeAllocations`), so that memory follows what is in use. But a history page is a few such
/// blocks (the records read, the messages, the answer line, its copy for the socket), and
/// faulting each one in page by page, then unmapping it, was a third of what an export of twenty
/// pages cost confabd. So the first large answer starts a burst in which blocks under a few MiB
/// come from the heap and stay there freed for the next page; `quiet` milliseconds after the
/// last large answer the burst ends: the thresholds are back and the heap's free memory is
/// given back (docs/performance.md has the figures).
final class LargeAnswers {
    /// An answer line reserved this large counts as large.
    static let large = 1 << 20
    static let quiet: UInt64 = 200
    private let timer: Timer
    private(set) var inBurst = false
    /// Bursts started and ended (tests).
    private(set) var started = 0, ended = 0

    init(loop: Loop) {
        timer = Timer(loop: loop)
        // Never what keeps the loop running: a daemon stopping does not wait for it.
        timer.setKeepsLoopAlive(false)
    }

    /// A large answer was written: a burst starts, or goes on for another `quiet` ms.
    func written() {
        if inBurst { return timer.postpone(to: Self.quiet) }
        inBurst = true
        started += 1
        LargeAllocations.reusedInBursts()
        timer.start(after: Self.quiet) { [unowned self] in
            inBurst = false
            ended += 1
            LargeAllocations.mappedOnTheirOwn()
            LargeAllocations.returnFreed()
        }
    }
}
