import ArgumentParser
import ConfabProtocol
import EventLoop
import LogStore
import Posix
#if canImport(Glibc)
import Glibc
#endif

/// Writes a data directory of conversation logs through the daemon's own log writer, so
/// start-up and load can be measured on files exactly like the ones confabd writes.
/// Content is deterministic: the same flags give the same logs (ids and times included).
@main
struct LogGen: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "confab-loggen",
        abstract: "Generate conversation logs for benchmarks (deterministic).")

    @Option(help: "Data directory (conversations/ is made inside it).")
    var dataDir: String

    @Option(help: "How many conversations.")
    var conversations: Int = 1000

    @Option(help: "Messages per conversation (user and assistant alternate).")
    var messages: Int = 20

    @Option(help: "Bytes of content per message.")
    var messageBytes: Int = 500

    @Option(help: "Model name written in each header and reply.")
    var model: String = "loggen-model"

    @Flag(help: "Write no index, as a confabd from before the index left its data: the first start reads every log.")
    var noIndex = false

    func validate() throws {
        guard conversations >= 0, messages >= 0, messageBytes >= 0 else {
            throw ValidationError("counts and sizes must not be negative")
        }
    }

    func run() throws {
        let loop = try Loop()
        // Durability is not what is being generated: the page cache is enough, and fsync per
        // log would make a 10,000-conversation directory take minutes.
        let store = try LogStore(directory: dataDir, loop: loop, syncEnabled: false)
        var rng = SplitMix64(seed: 20261122)
        let words = ["the", "broker", "reply", "stream", "token", "socket", "log", "model", "delta", "client",
                     "queue", "event", "loop", "history", "start", "summary", "upstream", "message", "turn", "write"]
        func text(_ bytes: Int) -> String {
            var out = ""
            out.reserveCapacity(bytes + 16)
            while out.utf8.count < bytes {
                if !out.isEmpty { out += " " }
                out += words[Int(rng.next() % UInt64(words.count))]
            }
            return String(out.utf8.prefix(bytes))!
        }
        let base: Int64 = 1_767_225_600_000 // 2026-01-01T00:00:00Z
        let author = Author(uid: 1000, login: "loggen", name: "Log Generator", clientID: "loggen")
        var failure: Error?
        for index in 0..<conversations {
            let id = Self.conversationID(index)
            let created = Timestamp(milliseconds: base + Int64(index) * 60_000)
            let header = ConversationHeader(id: id, created: created, title: "conversation \(index)", model: model, system: nil)
            // With sync off, create completes on the next loop turn.
            var opened: ConversationLog?
            store.create(header) { result in
                switch result {
                case .success(let log): opened = log
                case .failure(let error): failure = error
                }
            }
            while opened == nil && failure == nil && loop.runOnce(wait: true) {}
            guard let log = opened else { break }
            defer { log.close() }
            var records: [LogRecord] = []
            var time = created
            for sequence in stride(from: 1, through: messages, by: 1) {
                time = Timestamp(milliseconds: time.milliseconds + 1000)
                let user = sequence % 2 == 1
                let message = Message(id: MessageID.make(sequence), conversation: id, role: user ? .user : .assistant,
                                      content: text(messageBytes), status: .complete, created: time,
                                      author: user ? author : nil, model: user ? nil : model,
                                      finishReason: user ? nil : "stop")
                records.append(user ? .message(message) : .replyFinished(message))
                if records.count >= 64 {
                    try log.write(records, at: time)
                    records = []
                }
            }
            if !records.isEmpty { try log.write(records, at: time) }
        }
        if let failure { throw failure }
        // Let an index write the store started in the background finish, then write it whole.
        loop.run()
        if noIndex {
            try? Files.remove(store.indexPath)
        } else if let error = store.writeIndexNow() {
            throw error
        }
        print("wrote \(conversations) conversations × \(messages) messages of \(messageBytes) bytes to \(store.conversationsDirectory)")
    }

    /// Valid, distinct and sorted by index, so runs are comparable.
    static func conversationID(_ index: Int) -> String {
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz")
        var value = index
        var characters: [Character] = []
        for _ in 0..<ConversationID.length {
            characters.append(alphabet[value % alphabet.count])
            value /= alphabet.count
        }
        return String(characters.reversed())
    }
}

/// A small fixed-seed generator: the same content on every machine and run.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
