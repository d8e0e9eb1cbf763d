import ConfabProtocol
import Logging
import NIOCore
import NIOPosix
import Posix
import WebGateway

/// One attached file fetched from confabd for a download: its own short connection to the
/// daemon (checked to be this user's, as a page's is), `hello`, then `attachment.get` until
/// the file is whole. Bounded: no file is larger than an image may be, and the chunks must
/// add up to the size the daemon gave.
enum AttachmentDownload {
    enum Failure: Error {
        /// No such message or attachment: the page answers 404.
        case notFound
        /// confabd is not there, is another user's, or answered what it should not.
        case daemon(String)
    }

    /// Message ids as the daemon makes them (`m12`, `m12.3`): short and plain, so that
    /// nothing else reaches a call.
    static func isMessageID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 32
            && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2E }
    }

    static func fetch(socketPath: String, access: WebAccess, conversation: String, message: String, index: Int,
                      logger: Logger) async throws(Failure) -> (Attachment, [UInt8]) {
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            let fd = try UnixSocket.connect(to: socketPath)
            let peer: UnixSocket.PeerCredentials
            do { peer = try UnixSocket.peerCredentials(of: fd) } catch {
                Descriptor.close(fd)
                throw error
            }
            guard peer.uid == ProcessEnvironment.userID else {
                Descriptor.close(fd)
                logger.error("refusing \(socketPath): it is served by uid \(peer.uid) (pid \(peer.pid)), not by this user")
                throw Failure.daemon("confabd's socket is served by another user")
            }
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .withConnectedSocket(fd) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure.daemon("cannot reach confabd: \(error)")
        }
        do {
            return try await channel.executeThenClose { inbound, outbound in
                var lines = inbound.makeAsyncIterator()
                var core = RPCClientCore(maxLineBytes: 4 << 20)
                var arrived: [RPCClientCore.Event] = []
                func call(_ request: (id: Int, frame: [UInt8])) async throws -> JSON {
                    try await outbound.write(ByteBuffer(bytes: request.frame))
                    while true {
                        while arrived.isEmpty {
                            guard let buffer = try await lines.next() else { throw Failure.daemon("confabd went away") }
                            arrived = try core.receive(Array(buffer.readableBytesView))
                        }
                        switch arrived.removeFirst() {
                        case .answer(let id, .success(let result)) where id == request.id:
                            return result
                        case .answer(let id, .failure(let error)) where id == request.id:
                            if error.code == RPCError.notFound { throw Failure.notFound }
                            throw Failure.daemon("confabd refused: \(error.message)")
                        case .fatal(let error):
                            throw Failure.daemon("confabd refused: \(error.message)")
                        case .send(let frame):
                            try await outbound.write(ByteBuffer(bytes: frame))
                        case .answer, .encodedAnswer, .notification:
                            continue
                        }
                    }
                }
                func typed<Call: RPCCall>(_: Call.Type, _ params: Call.Params) async throws -> Call.Result {
                    let result = try await call(core.request(Call.self, params))
                    do throws(RPCClientCore.UnreadableAnswer) {
                        return try RPCClientCore.decode(Call.self, result)
                    } catch {
                        throw Failure.daemon("confabd: \(error)")
                    }
                }
                let hello = try await typed(HelloCall.self, DaemonHello.params(access: access, name: "web:download"))
                if let problem = DaemonHello.problem(with: hello, access: access) { throw Failure.daemon(problem) }
                // Each piece must start where the last ended, and all of them make the file the
                // daemon described: no more, no less (`AttachmentAssembly`).
                var file = AttachmentAssembly()
                while true {
                    let params = file.nextParams(conversation: conversation, message: message, index: index)
                    let piece = try await typed(AttachmentGetCall.self, params)
                    do throws(AttachmentAssembly.Failure) {
                        if try file.take(piece), let attachment = file.attachment { return (attachment, file.bytes) }
                    } catch {
                        throw Failure.daemon("confabd sent \(error)")
                    }
                }
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure.daemon("confabd: \(error)")
        }
    }

    /// `attachment; filename="notes.txt"; filename*=UTF-8''notes.txt`: the name someone gave,
    /// reduced to safe ASCII for the plain form and percent-encoded whole for the other, so no
    /// quote, semicolon or line break of it can reach the header.
    static func contentDisposition(name: String) -> String {
        let plain = String(decoding: name.utf8.map { byte -> UInt8 in
            isUnreserved(byte) ? byte : 0x5F
        }, as: UTF8.self)
        var encoded = ""
        for byte in name.utf8 {
            if isUnreserved(byte) {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                encoded += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return "attachment; filename=\"\(plain.isEmpty ? "file" : plain)\"; filename*=UTF-8''\(encoded)"
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == 0x2E || byte == 0x2D || byte == 0x5F
    }
}
