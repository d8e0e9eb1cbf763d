import XCTest

import ConfabProtocol
import Posix
#if canImport(Glibc)
import Glibc
#endif

/// Another client of an `InProcessBroker`, on its own connection to the broker's socket, with
/// the calls the integration tests' `RPCClient` has (`call`, `request`, `sendRaw`, `readFrame`,
/// `collect`, `awaitReply`), so that a test of broker behaviour reads the same in both places.
/// Instead of blocking on the socket it turns the broker's loop until what it waits for is there.
final class InProcessClient {
    let broker: InProcessBroker
    let fd: Int32
    private var buffer: [UInt8] = []
    private var atEnd = false
    private var nextID = 1
    /// Notifications read while waiting for something else, not yet taken by `collect`.
    var notifications: [(method: String, params: JSON)] = []

    struct NoFrame: Error, CustomStringConvertible {
        let description: String
    }

    /// Connects; says hello with `name` as `Harness.client(name:)` does, unless it is nil.
    init(_ broker: InProcessBroker, name: String? = "tester") throws {
        self.broker = broker
        fd = try UnixSocket.connect(to: broker.directory + "/socket")
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        if let name {
            try call(RPCMethod.hello.rawValue, ["client": "integration-test", "name": .string(name)])
        }
    }

    func close() { Files.close(fd) }

    func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN {
                    // The broker reads what is sent only when its loop turns.
                    _ = broker.loop.runOnce(wait: false)
                    continue
                }
                throw NoFrame(description: "send: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
    }

    func sendRaw(_ text: String) throws { try sendRaw(Array(text.utf8)) }

    /// The next frame, or nil once the broker closed the connection; turns the loop meanwhile.
    func readFrame() throws -> JSON? {
        var line: [UInt8]?
        broker.turn(until: {
            line = takeLine()
            return line != nil || atEnd
        })
        guard let line else {
            if atEnd { return nil }
            throw NoFrame(description: "no frame")
        }
        return try JSON.parse(line)
    }

    private func takeLine() -> [UInt8]? {
        if buffer.firstIndex(of: 0x0A) == nil, !atEnd {
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count == 0 || (count < 0 && errno == ECONNRESET) {
                    atEnd = true
                    break
                }
                guard count > 0 else { break }
                buffer += chunk[0..<count]
            }
        }
        guard let newline = buffer.firstIndex(of: 0x0A) else { return nil }
        let line = Array(buffer[..<newline])
        buffer.removeSubrange(...newline)
        return line
    }

    /// Sends a request and returns its response frame, keeping the notifications met on the way.
    func request(_ method: String, _ params: JSON = [:]) throws -> JSON {
        let id = nextID
        nextID += 1
        try sendRaw(RPC.request(id: .int(id), method: method, params: params))
        return try response(to: .int(id))
    }

    func response(to id: JSON) throws -> JSON {
        while true {
            guard let frame = try readFrame() else { throw NoFrame(description: "connection closed awaiting response \(id)") }
            if let method = frame["method"]?.string, frame["id"] == nil {
                notifications.append((method, frame["params"] ?? .null))
                continue
            }
            if frame["id"] == id { return frame }
            throw NoFrame(description: "unexpected frame \(frame.text)")
        }
    }

    /// The result, or the error answer thrown as an `RPCError`.
    @discardableResult
    func call(_ method: String, _ params: JSON = [:]) throws -> JSON {
        let frame = try request(method, params)
        if let error = frame["error"].flatMap(RPCError.init(json:)) { throw error }
        return frame["result"] ?? .null
    }

    /// Takes notifications until one matches; returns everything taken, the match last.
    func collect(until match: (String, JSON) -> Bool) throws -> [(method: String, params: JSON)] {
        var taken: [(method: String, params: JSON)] = []
        while true {
            if !notifications.isEmpty {
                let next = notifications.removeFirst()
                taken.append(next)
                if match(next.method, next.params) { return taken }
                continue
            }
            guard let frame = try readFrame() else { throw NoFrame(description: "connection closed; got \(taken.map(\.method))") }
            if let method = frame["method"]?.string {
                notifications.append((method, frame["params"] ?? .null))
            }
        }
    }

    /// Waits for the end of reply `id`: every notification up to it, and the final message.
    func awaitReply(_ id: String) throws -> (notes: [(method: String, params: JSON)], final: JSON) {
        let notes = try collect(until: { method, params in
            (method == "message.completed" || method == "message.failed") && params["message"]?["id"]?.string == id
        })
        return (notes, notes.last!.params["message"]!)
    }
}

extension InProcessBroker {
    /// Sends `content` in conversation `id` from `client` and has the model answer `answer`:
    /// the reply's final message, as `client` (attached) hears it.
    func ask(_ client: InProcessClient, _ id: String, _ content: String, answer: String) throws -> JSON {
        let before = upstream.streams.count
        let sent = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": .string(content)])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        try answerNext(after: before, answer)
        return try client.awaitReply(reply).final
    }

    /// Waits for the upstream to be asked for a reply beyond the first `before`, and answers it.
    func answerNext(after before: Int, _ answer: String) throws {
        turn(until: { upstream.streams.count > before })
        let stream = try XCTUnwrap(upstream.streams.dropFirst(before).first, "the upstream was asked for no reply")
        stream.send(answer)
        stream.finish()
    }

    func createConversation(_ client: InProcessClient, title: String = "test", system: String? = nil) throws -> String {
        var params: [String: JSON] = ["title": .string(title)]
        if let system { params["system"] = .string(system) }
        return try XCTUnwrap(try client.call(RPCMethod.conversationCreate.rawValue, .object(params))["conversation"]?["id"]?.string)
    }

    /// The broker's data directory (the integration harness's `dataDirectory`).
    var dataDirectory: String { directory + "/data" }
}
