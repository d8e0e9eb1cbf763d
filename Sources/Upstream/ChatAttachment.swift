import ConfabProtocol

/// A file a user turn carries, as the model is to be sent it (docs/protocol.md, "What the model
/// is sent"): a text file's text, an image's bytes, or a line of text standing for a file that
/// cannot be sent as itself.
public struct ChatAttachment: Equatable, Sendable {
    public enum Content: Equatable, Sendable {
        /// An image whose bytes are `bytes`.
        public static func image(encoding bytes: [UInt8]) -> Content { .image(base64: Base64.bytes(of: bytes)) }

        /// Its bytes are not read yet: only its size is known (the context budget counts it
        /// so, before the turns that fit are read). Sent, it would be a line saying so.
        case unread
        /// A text file's text.
        case text(String)
        /// An image of the attachment's `type`, as the padded base64 of its bytes: encoded when it
        /// is read, off the loop, so that writing a request body only copies it.
        case image(base64: [UInt8])
        /// Sent as this line of text instead of the file: its blob could not be read, or the
        /// model takes no images.
        case line(String)
    }

    public var name: String
    public var type: AttachmentType
    public var size: Int
    public var sha256: String
    public var content: Content

    public init(name: String, type: AttachmentType, size: Int, sha256: String, content: Content = .unread) {
        self.name = name
        self.type = type
        self.size = size
        self.sha256 = sha256
        self.content = content
    }

    public init(_ attachment: Attachment, content: Content = .unread) {
        self.init(name: attachment.name, type: attachment.type, size: attachment.size, sha256: attachment.sha256, content: content)
    }

    /// The base64 of an image that goes as an image.
    public var imageBase64: [UInt8]? {
        if case .image(let base64) = content { base64 } else { nil }
    }

    /// Sizes as people read them: `212 KiB`, `1.5 MiB`, `120 B`.
    public static func describe(size: Int) -> String {
        if size < 1024 { return "\(size) B" }
        if size < 1024 * 1024 { return "\((size + 512) / 1024) KiB" }
        let tenths = (size * 10 + 512 * 1024) / (1024 * 1024)
        return tenths % 10 == 0 ? "\(tenths / 10) MiB" : "\(tenths / 10).\(tenths % 10) MiB"
    }

    /// The line an image stands as for a model that takes none, or for another `reason`.
    public static func imageNotSentLine(name: String, type: AttachmentType, size: Int, reason: String = "this model takes no images") -> String {
        "[image \(name) (\(type.rawValue), \(describe(size: size))) not sent: \(reason)]"
    }

    /// The line an image stands as when newer images of the request already take what one
    /// request carries (`images` images, `bytes` of them).
    public static func imageOverRequestLimitLine(name: String, type: AttachmentType, size: Int, images: Int, bytes: Int) -> String {
        "[image \(name) (\(type.rawValue), \(describe(size: size))) not sent: one request carries the newest \(images) images"
            + " and \(describe(size: bytes)) of images at most]"
    }

    /// The line a text file stands as when newer text files of the request already take what
    /// one request carries (`files` files, `bytes` of them).
    public static func textOverRequestLimitLine(name: String, size: Int, files: Int, bytes: Int) -> String {
        "[attached file \(name) (\(AttachmentType.text.rawValue), \(describe(size: size))) not sent: one request carries the newest \(files) text files"
            + " and \(describe(size: bytes)) of text files at most]"
    }

    /// The line a file stands as when its stored bytes cannot be read.
    public static func unreadableLine(name: String, type: AttachmentType) -> String {
        "[attached file \(name) (\(type.rawValue)) not sent: its stored copy could not be read]"
    }

    /// This file as text of its turn: a text file as `NAME:` and a fenced block, a line as
    /// itself; nil for an image that goes as an image. `imagesAsLines`: an API with no images
    /// is sent the line naming it instead.
    func text(imagesAsLines: Bool, unreadAsLines: Bool = true) -> String? {
        switch content {
        case .text(let text): return Self.fenced(text, name: name)
        case .line(let line): return line
        case .image: return imagesAsLines ? Self.imageNotSentLine(name: name, type: type, size: size) : nil
        case .unread: return unreadAsLines ? Self.unreadableLine(name: name, type: type) : nil
        }
    }

    /// `NAME:`, then `text` in a fenced block whose fence (backticks, at least three) is longer
    /// than any run of backticks in it, so nothing in the file can close the block early.
    public static func fenced(_ text: String, name: String) -> String {
        var longest = 0, run = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: "`") {
                run += 1
                longest = max(longest, run)
            } else {
                run = 0
            }
        }
        let fence = String(repeating: "`", count: max(3, longest + 1))
        let body = text.isEmpty || text.hasSuffix("\n") ? text : text + "\n"
        return name + ":\n" + fence + "\n" + body + fence
    }

    /// Bytes a text file not yet read will take in its turn: its text (its size: the bytes are
    /// UTF-8), its name line, two fences and their line breaks, and the blank line before it.
    var unreadTextBytes: Int {
        guard case .unread = content, type == .text else { return 0 }
        return name.utf8.count + size + 12
    }
}

extension ChatMessage {
    /// The turn's text as the model reads it: its own text, then each text file and each line
    /// standing for a file, in the order attached, separated by blank lines. Images are left
    /// to the API's own form, unless `imagesAsLines`.
    /// `unreadAsLines: false` leaves out files not read yet (for an estimate that counts them by size).
    public func text(imagesAsLines: Bool, unreadAsLines: Bool = true) -> String {
        guard !attachments.isEmpty else { return content }
        var parts = content.isEmpty ? [] : [content]
        for attachment in attachments {
            if let text = attachment.text(imagesAsLines: imagesAsLines, unreadAsLines: unreadAsLines) { parts.append(text) }
        }
        return parts.joined(separator: "\n\n")
    }

    /// Bytes the text files not read yet will add to the turn's text.
    public var unreadTextBytes: Int { attachments.reduce(0) { $0 + $1.unreadTextBytes } }

    /// The images the turn sends as images, in the order attached.
    public var images: [ChatAttachment] { attachments.filter { $0.imageBase64 != nil } }

    /// About the bytes the turn's files add to a body (images as base64), for reserving its room at once.
    var attachedBytes: Int {
        attachments.reduce(0) { total, attachment in
            switch attachment.content {
            case .image(let base64): total + base64.count + 96
            case .text(let text): total + text.utf8.count + attachment.name.utf8.count + 32
            case .line(let line): total + line.utf8.count + 2
            case .unread: total + 128
            }
        }
    }
}
