import ConfabProtocol
import EventLoop
import LogStore

/// A file being uploaded with `blob.put`, chunk by chunk, on one connection.
final class BlobUpload {
    var bytes: [UInt8] = []
    /// When its last chunk came (the loop's clock, in milliseconds): an upload left without
    /// one for `limits.uploadIdleSeconds` is dropped.
    var lastChunkAt: UInt64

    init(now: UInt64) { lastChunkAt = now }
}

/// What a connection stored with `blob.put`: what its messages may name.
struct StoredBlob {
    var type: AttachmentType
    var size: Int
    /// A message this connection sent named it.
    var sent = false
}

/// `blob.put`, the attachments a `message.send` names, `attachment.get`, and the collection of
/// blobs nothing references (docs/protocol.md, "Attachments").
extension Broker {
    /// At most this many uploads in progress (or being stored) on one connection.
    static let maxUploadsPerConnection = 4
    // The room for files no message has named yet (uploads held in memory by every
    // connection together and by other users' connections together, the files one connection
    // stored and has not sent, and the same for all the connections of one user other than
    // the daemon's own) is `limits.attachmentRoomMiB` and what it derives (DaemonSettings): a
    // chunk that would pass any of them is refused, so that many connections cannot make the
    // daemon hold without bound, and other users cannot take the owner's share.

    /// `blob.put`: a chunk of a new or running upload; with `final`, the whole file checked,
    /// typed from its bytes and stored. Chunks are answered at once, the final one once the
    /// blob is durable (in `later()`'s place).
    func blobPut(_ params: BlobPutParams, _ client: ClientSession, now respond: Respond, later: () -> Respond) throws(RPCError) {
        let text = params.data
        // Checked before decoding too: a line of many megabytes of base64 is not decoded to be refused.
        guard text.utf8.count <= (AttachmentLimits.maxChunkBytes + 2) / 3 * 4 else {
            throw .invalidParams("parameter \"data\" holds more than \(AttachmentLimits.maxChunkBytes) bytes: send the file in chunks of at most 1 MiB")
        }
        guard let chunk = Base64.decode(text) else {
            throw .invalidParams("parameter \"data\" is not standard padded base64 (no white space, no line breaks)")
        }
        guard chunk.count <= AttachmentLimits.maxChunkBytes else {
            throw .invalidParams("parameter \"data\" holds more than \(AttachmentLimits.maxChunkBytes) bytes: send the file in chunks of at most 1 MiB")
        }
        let isFinal = params.isFinal ?? false
        let id: String
        let upload: BlobUpload
        if let given = params.upload {
            guard let running = client.uploads[given] else {
                throw .invalidParams("no upload \"\(given)\" in progress on this connection (an upload ends with its final chunk, "
                    + "when refused, or after \(limits.uploadIdleSeconds) seconds without a chunk)")
            }
            id = given
            upload = running
        } else {
            guard client.uploads.count + client.uploadsBeingStored < Self.maxUploadsPerConnection else {
                throw RPCError(code: RPCError.limitReached,
                               message: "too many uploads in progress on this connection (limit \(Self.maxUploadsPerConnection)): finish one first")
            }
            id = "u\(client.nextUploadNumber)"
            client.nextUploadNumber += 1
            upload = BlobUpload(now: loop.now)
            client.uploads[id] = upload
        }
        if let refusal = uploadRoomProblem(adding: chunk.count, on: client) {
            client.uploads[id] = nil
            throw RPCError(code: RPCError.limitReached, message: "\(refusal); the upload is dropped")
        }
        upload.bytes += chunk
        upload.lastChunkAt = loop.now
        if let limit = Self.exceededLimit(upload.bytes) {
            client.uploads[id] = nil
            throw RPCError(code: RPCError.limitReached, message: "file too large: \(limit); the upload is dropped")
        }
        guard isFinal else {
            respond(.success(BlobPutResult(upload: id, size: upload.bytes.count).json))
            return
        }
        client.uploads[id] = nil
        let bytes = upload.bytes
        guard let type = AttachmentType.detect(bytes) else {
            throw .invalidParams("file refused: \(AttachmentType.refusal(of: bytes) ?? "not a type this protocol takes")")
        }
        let answer = later()
        client.uploadsBeingStored += 1
        client.uploadBytesBeingStored += bytes.count
        store.blobs.store(bytes) { [unowned self] result in
            client.uploadsBeingStored -= 1
            client.uploadBytesBeingStored -= bytes.count
            switch result {
            case .failure(let error):
                logger.error("client=\(client.id) cannot store blob: \(error)")
                answer(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed, the file was not stored: \(error)")))
            case .success(let digest):
                if client.isClosed {
                    // Gone while its file was written: nothing can name it now.
                    collectBlobs([digest], why: "client=\(client.id) disconnected while storing")
                    return
                }
                if client.storedBlobs[digest] == nil {
                    client.storedBlobs[digest] = StoredBlob(type: type, size: bytes.count)
                    client.unsentBlobBytes += bytes.count
                }
                logger.info("client=\(client.id) stored blob=\(digest) type=\(type.rawValue) bytes=\(bytes.count)")
                answer(.success(BlobPutResult(attachment: StoredFile(type: type, size: bytes.count, sha256: digest)).json))
            }
        }
    }

    /// Why `count` more bytes of upload on `client` are refused: its files on disk no message
    /// named yet, or the memory all uploads in progress hold, would pass their bounds.
    func uploadRoomProblem(adding count: Int, on client: ClientSession) -> String? {
        if client.unsentBlobBytes + client.uploadBytesInMemory + count > limits.maxUnsentBlobBytes {
            return "this connection stored files no message has named yet, \(ByteSize.text(limits.maxUnsentBlobBytes)) at most: send a message naming them first"
        }
        var all = 0, others = 0, sameUserUnsent = 0
        for other in clients.values {
            let held = other.uploadBytesInMemory
            all += held
            if !isOwner(other) { others += held }
            // A link's holder is one user; the uid's own connections are another.
            if other.credentials.uid == client.credentials.uid, other.link?.id == client.link?.id { sameUserUnsent += other.unsentBlobBytes + held }
        }
        if !isOwner(client), sameUserUnsent + count > limits.maxOtherUserUnsentBlobBytes {
            return "your connections together hold files no message has named yet and uploads in progress, "
                + "\(ByteSize.text(limits.maxOtherUserUnsentBlobBytes)) at most for a user other than the daemon's own: send a message naming them first"
        }
        if all + count > limits.maxUploadBytesInMemory {
            return "the daemon holds \(ByteSize.text(limits.maxUploadBytesInMemory)) of uploads in progress: try again once they are stored"
        }
        if !isOwner(client), others + count > limits.maxOtherUsersUploadBytesInMemory {
            return "other users' uploads in progress hold \(ByteSize.text(limits.maxOtherUsersUploadBytesInMemory)): try again once they are stored"
        }
        return nil
    }

    /// Drops every upload in progress that got no chunk for `limits.uploadIdleSeconds`, checked
    /// every tenth of that (at most every 30 seconds), so that a connection cannot keep memory
    /// with an upload it never finishes.
    func startDroppingIdleUploads() {
        let period = min(UInt64(limits.uploadIdleSeconds) * 100, 30_000)
        let timer = Timer(loop: loop)
        timer.setKeepsLoopAlive(false)
        timer.start(after: period, repeat: period) { [unowned self] in dropIdleUploads() }
    }

    func dropIdleUploads() {
        let idleMilliseconds = UInt64(limits.uploadIdleSeconds) * 1000
        let now = loop.now
        for client in clients.values where !client.uploads.isEmpty {
            for (id, upload) in client.uploads where now - min(upload.lastChunkAt, now) >= idleMilliseconds {
                client.uploads[id] = nil
                logger.info("client=\(client.id) upload=\(id) dropped: no chunk for \(limits.uploadIdleSeconds) s (\(upload.bytes.count) bytes held)")
            }
        }
    }

    /// A message naming `attachments` was stored: its files are no longer this connection's alone.
    func markSent(_ attachments: [Attachment], by client: ClientSession) {
        for attachment in attachments {
            guard var stored = client.storedBlobs[attachment.sha256], !stored.sent else { continue }
            stored.sent = true
            client.storedBlobs[attachment.sha256] = stored
            client.unsentBlobBytes -= stored.size
        }
    }

    /// The limit an upload of `bytes` so far has passed: an image's at any point, a text file's
    /// once the bytes are past it and do not begin as an image does.
    static func exceededLimit(_ bytes: [UInt8]) -> String? {
        if bytes.count > AttachmentLimits.maxImageBytes {
            return "an image is at most \(AttachmentLimits.maxImageBytes) bytes (5 MiB)"
        }
        if bytes.count > AttachmentLimits.maxTextBytes, AttachmentType.detect(bytes.prefix(12)).map(\.isImage) != true {
            return "a text file is at most \(AttachmentLimits.maxTextBytes) bytes (1 MiB)"
        }
        return nil
    }

    /// The attachments a `message.send` names (`attachments: [{name, sha256}]`), each a blob
    /// this connection stored, within the count and size limits.
    func attachments(_ refs: [AttachmentRef], _ client: ClientSession) throws(RPCError) -> [Attachment] {
        var attachments: [Attachment] = []
        var total = 0
        for (index, ref) in refs.enumerated() {
            let at = "attachments[\(index)]"
            let (name, digest) = (ref.name, ref.sha256)
            if let problem = DisplayName.fileNameProblem(name) { throw .invalidParams("parameter \"\(at).name\" \(problem)") }
            guard Attachment.isDigest(digest) else {
                throw .invalidParams("parameter \"\(at).sha256\" must be 64 lowercase hex digits")
            }
            guard let stored = client.storedBlobs[digest] else {
                throw .invalidParams("parameter \"\(at).sha256\" names no file this connection stored with blob.put")
            }
            total += stored.size
            guard total <= AttachmentLimits.maxMessageBytes else {
                throw RPCError(code: RPCError.limitReached,
                               message: "attachments too large: at most \(AttachmentLimits.maxMessageBytes) bytes (20 MiB) together on one message")
            }
            attachments.append(Attachment(name: name, type: stored.type, size: stored.size, sha256: digest))
        }
        return attachments
    }

    /// `attachment.get`: up to 1 MiB of one attachment of a message, from `offset`, in base64.
    func attachmentGet(_ conversation: Conversation, _ params: AttachmentGetParams, _ respond: Respond) throws(RPCError) {
        let id = params.message
        guard MessageID.order(of: id) != nil else { throw .invalidParams("parameter \"message\" is not a message id") }
        guard let message = try conversation.message(id) else {
            throw .notFound("no message \(id) in conversation \(conversation.id)")
        }
        let attachments = message.attachments ?? []
        let index = params.index
        guard index < attachments.count else {
            throw .notFound("message \(id) has \(attachments.count) attachment\(attachments.count == 1 ? "" : "s"): no index \(index)")
        }
        let attachment = attachments[index]
        let offset = params.offset ?? 0
        guard offset <= attachment.size else {
            throw .invalidParams("parameter \"offset\" is past the attachment's end (\(attachment.size) bytes)")
        }
        let count = min(AttachmentLimits.maxChunkBytes, attachment.size - offset)
        store.blobs.read(attachment.sha256, offset: offset, count: count) { [unowned self] result in
            switch result {
            case .failure(let error):
                logger.error("conversation=\(conversation.id) message=\(id) cannot read blob=\(attachment.sha256): \(error)")
                respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed, cannot read the attachment: \(error)")))
            case .success(let bytes):
                let more = offset + bytes.count < attachment.size
                guard bytes.count == count else {
                    respond(.failure(RPCError(code: RPCError.storageFailed,
                                              message: "storage failed: the stored file is shorter than the attachment says")))
                    return
                }
                respond(.success(AttachmentGetResult(attachment: attachment, offset: offset, data: Base64.encode(bytes), more: more).json))
            }
        }
    }

    /// Removes those of `candidates` that no conversation's messages name and no open
    /// connection stored (it may still send a message naming them).
    func collectBlobs(_ candidates: some Sequence<String>, why: String) {
        if let held = blobCollectionHeld {
            logger.warning("unreferenced blobs not collected (\(why)): a log on disk did not load at start-up: \(held)")
            return
        }
        var unreferenced = Set(candidates).filter { blobsInNewLogs[$0] == nil }
        for client in clients.values where !unreferenced.isEmpty {
            unreferenced = unreferenced.filter { client.storedBlobs[$0] == nil }
        }
        for conversation in conversations.values where !unreferenced.isEmpty {
            unreferenced.subtract(conversation.log.blobs)
        }
        guard !unreferenced.isEmpty else { return }
        let removed = store.blobs.remove(unreferenced)
        logger.info("\(removed) unreferenced blob\(removed == 1 ? "" : "s") removed (\(why))")
    }

    /// Marks the blobs `messages` name as referenced while their new log is being created,
    /// before it is listed; `release` ends that.
    func holdBlobs(of messages: [Message]) -> [String] {
        let digests = Set(messages.flatMap(\.attachmentDigests))
        for digest in digests { blobsInNewLogs[digest, default: 0] += 1 }
        return Array(digests)
    }

    func releaseBlobs(_ digests: [String]) {
        for digest in digests {
            let count = (blobsInNewLogs[digest] ?? 1) - 1
            blobsInNewLogs[digest] = count > 0 ? count : nil
        }
    }
}
