import ConfabProtocol
import DaemonSettings
import LogStore
import Upstream

/// Where a reply gets the bytes of the files its turns carry: stored files read by SHA-256,
/// off the loop thread (a file of megabytes must not stall every other client).
public protocol AttachmentReader: AnyObject {
    /// Reads each digest's stored bytes; `done` runs once, on the loop thread, with what could be
    /// read (a digest missing from it could not be: removed, unreadable).
    func read(_ digests: [String], done: @escaping ([String: [UInt8]]) -> Void)
}

extension BlobStore: AttachmentReader {
    /// Every digest's blob, each read whole off the loop; `done` runs once all have answered.
    public func read(_ digests: [String], done: @escaping ([String: [UInt8]]) -> Void) {
        var found: [String: [UInt8]] = [:]
        var left = digests.count
        guard left > 0 else { return done([:]) }
        for digest in digests {
            read(digest) { (bytes: [UInt8]?) in
                if let bytes { found[digest] = bytes }
                left -= 1
                if left == 0 { done(found) }
            }
        }
    }
}

/// Who says a conversation's model takes no images, when one does.
struct ImagePolicy: Equatable {
    /// The provider or profile that says so, as an error names it: `provider "local"`.
    let refusedBy: String?

    var takesImages: Bool { refusedBy == nil }

    /// Why a send carrying an image is refused.
    var refusal: String? {
        refusedBy.map { "\($0) takes no images: this conversation's model would not be sent them" }
    }
}

extension ReplyRunner {
    /// Whether the conversation's model takes images: its profile's `vision` over its provider's;
    /// a completions provider never does.
    func imagePolicy(of conversation: Conversation) -> ImagePolicy {
        let provider = providers[conversation.provider]
        if let provider, case .completions = provider.api {
            return ImagePolicy(refusedBy: "provider \"\(provider.name)\" (a completions API)")
        }
        if let name = conversation.profile, let takesImages = profiles[name]?.takesImages {
            return ImagePolicy(refusedBy: takesImages ? nil : "profile \"\(name)\" (vision = false)")
        }
        if let provider, !provider.config.takesImages {
            return ImagePolicy(refusedBy: "provider \"\(provider.name)\" (vision = false)")
        }
        return ImagePolicy(refusedBy: nil)
    }

    /// Images in the context of a conversation whose model takes none (sent before a reload set
    /// `vision = false`, or before `conversation.configure` chose such a profile) go as a line
    /// naming each instead.
    static func withoutImages(_ messages: [ChatMessage]) -> [ChatMessage] {
        messages.map { message in
            guard message.attachments.contains(where: \.type.isImage) else { return message }
            var message = message
            for index in message.attachments.indices where message.attachments[index].type.isImage {
                let image = message.attachments[index]
                message.attachments[index].content = .line(ChatAttachment.imageNotSentLine(name: image.name, type: image.type, size: image.size))
            }
            return message
        }
    }

    /// Images one request carries at most, and their bytes together: Anthropic's Messages API
    /// refuses more than 100 images or a body over 32 MB, and a request of many megabytes is
    /// held in memory while it is sent, so a long conversation of screenshots must not grow it
    /// without bound. 20 MiB of images is about 27 MB of base64.
    static let maxImagesPerRequest = 20
    static let maxImageBytesPerRequest = 20 << 20

    /// Keeps the newest images (newest turn first, each turn's in the order attached) up to
    /// `maxImagesPerRequest` and `maxImageBytesPerRequest`; from the first that would pass
    /// either, it and every older image go as a line naming it. Returns how many went so.
    static func limitingImages(_ messages: inout [ChatMessage]) -> Int {
        limiting(&messages, where: \.type.isImage, count: maxImagesPerRequest, bytes: maxImageBytesPerRequest) { file in
            ChatAttachment.imageOverRequestLimitLine(name: file.name, type: file.type, size: file.size,
                                                     images: maxImagesPerRequest, bytes: maxImageBytesPerRequest)
        }
    }

    /// Text files one request carries at most, and their bytes together: each is at most 1 MiB,
    /// but a writer who attaches many to message after message would otherwise have every later
    /// reply of a conversation without a context budget read and send them all.
    static let maxTextFilesPerRequest = 20
    static let maxTextBytesPerRequest = 4 << 20

    /// As `limitingImages`, for text files: the newest kept, from the first over either bound on
    /// every older one a line naming it. Returns how many went so.
    static func limitingTextFiles(_ messages: inout [ChatMessage]) -> Int {
        limiting(&messages, where: { $0.type == .text }, count: maxTextFilesPerRequest, bytes: maxTextBytesPerRequest) { file in
            ChatAttachment.textOverRequestLimitLine(name: file.name, size: file.size, files: maxTextFilesPerRequest, bytes: maxTextBytesPerRequest)
        }
    }

    /// Keeps the newest files `kind` picks (newest turn first, each turn's in the order attached)
    /// up to `count` and `bytes`; from the first that would pass either, it and every older one
    /// go as the line `line` gives. Returns how many went so.
    private static func limiting(_ messages: inout [ChatMessage], where kind: (ChatAttachment) -> Bool, count: Int, bytes limit: Int,
                                 line: (ChatAttachment) -> String) -> Int {
        var files = 0, bytes = 0, overLimit = false, named = 0
        for turn in messages.indices.reversed() {
            for index in messages[turn].attachments.indices {
                let file = messages[turn].attachments[index]
                guard kind(file), file.content == .unread else { continue }
                if !overLimit, files < count, bytes + file.size <= limit {
                    files += 1
                    bytes += file.size
                    continue
                }
                overLimit = true
                named += 1
                messages[turn].attachments[index].content = .line(line(file))
            }
        }
        return named
    }

    /// Reads the bytes of every file the reply's request carries and not read yet, then `ready`
    /// runs, unless the reply ended meanwhile (cancelled, deleted, shutdown). A file that cannot
    /// be read is sent as a line saying so, and logged: a conversation never breaks for good
    /// because a stored file went missing. With nothing to read, `ready` runs at once.
    func readAttachments(of reply: Reply, in conversation: Conversation, ready: @escaping () -> Void) {
        var digests: [String] = []
        for message in reply.request.messages {
            for attachment in message.attachments where attachment.content == .unread && !digests.contains(attachment.sha256) {
                digests.append(attachment.sha256)
            }
        }
        guard !digests.isEmpty else { return ready() }
        guard let reader = attachmentReader else { return fill(reply, in: conversation, with: [:], ready: ready) }
        reader.read(digests) { [unowned self] found in
            guard !reply.isOver, !reply.isFinishing else { return }
            fill(reply, in: conversation, with: found, ready: ready)
        }
    }

    /// Puts what was read into the reply's request. Checking the bytes (a text file of a
    /// megabyte is validated as UTF-8) is done on the thread pool too.
    private func fill(_ reply: Reply, in conversation: Conversation, with found: [String: [UInt8]], ready: @escaping () -> Void) {
        let unread = reply.request.messages.map { $0.attachments.filter { $0.content == .unread } }
        loop.queueWork({ () -> [[(content: ChatAttachment.Content, problem: String?)]] in
            unread.map { turn in
                turn.map { attachment in
                    var problem: String?
                    let content = ChatAttachment.stored(attachment, bytes: found[attachment.sha256]) { problem = $0 }
                    return (content, problem)
                }
            }
        }, done: { [unowned self] (read: [[(content: ChatAttachment.Content, problem: String?)]]) in
            guard !reply.isOver, !reply.isFinishing else { return }
            for turn in reply.request.messages.indices {
                var next = read[turn].makeIterator()
                for index in reply.request.messages[turn].attachments.indices where reply.request.messages[turn].attachments[index].content == .unread {
                    guard let (content, problem) = next.next() else { break }
                    let attachment = reply.request.messages[turn].attachments[index]
                    if let problem {
                        logger.warning("conversation=\(conversation.id) reply=\(reply.message.id) attachment \(attachment.sha256)"
                            + " (\(attachment.type.rawValue)) sent as a line of text: \(problem)")
                    }
                    reply.request.messages[turn].attachments[index].content = content
                }
            }
            ready()
        })
    }

}

extension ChatAttachment {
    /// A stored file as its turn sends it: checked against what the message recorded (a text
    /// file must still be UTF-8, an image still of its type), else the line saying it is not sent.
    static func stored(_ attachment: ChatAttachment, bytes: [UInt8]?, problem: (String) -> Void) -> ChatAttachment.Content {
        let unreadable = ChatAttachment.Content.line(ChatAttachment.unreadableLine(name: attachment.name, type: attachment.type))
        guard let bytes else {
            problem("its stored copy is missing or cannot be read")
            return unreadable
        }
        guard bytes.count == attachment.size, AttachmentType.detect(bytes) == attachment.type else {
            problem("its stored copy is not the \(attachment.size) bytes of \(attachment.type.rawValue) the message recorded")
            return unreadable
        }
        if attachment.type == .text {
            return .text(String(decoding: bytes, as: UTF8.self))
        }
        return .image(encoding: bytes)
    }
}

extension Broker {
    /// Reads the stored files replies send: the store's blobs unless a test says otherwise.
    public var attachmentReader: (any AttachmentReader)? {
        get { replies.attachmentReader }
        set { replies.attachmentReader = newValue }
    }

    /// A send carrying an image to a conversation whose model takes none (a completions
    /// provider, or `vision = false` on its profile or provider) is refused before anything is
    /// stored or requested, naming who says so.
    func refuseImages(_ attachments: [Attachment], in conversation: Conversation) throws(RPCError) {
        guard let image = attachments.first(where: \.type.isImage), let refusal = replies.imagePolicy(of: conversation).refusal else { return }
        throw .invalidParams("\(image.name) is an image, and \(refusal)")
    }
}
