/// A file a user message carries: stored once by the daemon under its SHA-256 and referenced
/// from the message record by these fields (docs/protocol.md, "Attachments").
public struct Attachment: Equatable, Hashable, Sendable {
    /// The file's name as the client gave it (its last path component), never a path.
    public var name: String
    /// The media type the daemon found in the bytes: `text/plain`, `image/png`, `image/jpeg`,
    /// `image/gif` or `image/webp`.
    public var type: AttachmentType
    /// Bytes.
    public var size: Int
    /// Lowercase hex SHA-256 of the bytes: the blob's name in the store.
    public var sha256: String

    public init(name: String, type: AttachmentType, size: Int, sha256: String) {
        self.name = name
        self.type = type
        self.size = size
        self.sha256 = sha256
    }

    public var json: JSON {
        ["name": .string(name), "type": .string(type.rawValue), "size": .int(size), "sha256": .string(sha256)]
    }

    public init?(json: JSON) {
        guard let name = json["name"]?.string, let type = json["type"]?.string.flatMap(AttachmentType.init(rawValue:)),
              let size = json["size"]?.int, size >= 0, let sha256 = json["sha256"]?.string, Self.isDigest(sha256)
        else { return nil }
        self.init(name: name, type: type, size: size, sha256: sha256)
    }

    /// 64 lowercase hex digits: the only form a blob name takes (no path can be built from anything else).
    public static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}

/// What an attachment is, found from its bytes (never from its name).
public enum AttachmentType: String, CaseIterable, Sendable {
    case text = "text/plain"
    case png = "image/png"
    case jpeg = "image/jpeg"
    case gif = "image/gif"
    case webp = "image/webp"

    public var isImage: Bool { self != .text }

    /// The type of `bytes`: an image by its signature, text when the bytes are valid UTF-8
    /// holding no NUL; nil for anything else, with why in `refusal(of:)`.
    public static func detect(_ bytes: some Collection<UInt8>) -> AttachmentType? {
        let head = Array(bytes.prefix(12))
        if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if head.starts(with: [0xFF, 0xD8, 0xFF]) { return .jpeg }
        if head.starts(with: Array("GIF87a".utf8)) || head.starts(with: Array("GIF89a".utf8)) { return .gif }
        if head.count == 12, head.starts(with: Array("RIFF".utf8)), Array(head[8..<12]) == Array("WEBP".utf8) { return .webp }
        guard !bytes.contains(0) else { return nil }
        var validator = UTF8Validator()
        for byte in bytes where !validator.feed(byte) { return nil }
        return validator.isComplete ? .text : nil
    }

    /// Why `bytes` is not an attachment this protocol takes, or nil when it is one.
    public static func refusal(of bytes: some Collection<UInt8>) -> String? {
        guard detect(bytes) == nil else { return nil }
        if bytes.contains(0) { return "it is neither text (it holds NUL bytes) nor a PNG, JPEG, GIF or WebP image" }
        return "it is neither UTF-8 text nor a PNG, JPEG, GIF or WebP image"
    }
}

/// A streaming check of UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
struct UTF8Validator {
    private var needed = 0
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    var isComplete: Bool { needed == 0 }

    mutating func feed(_ byte: UInt8) -> Bool {
        if needed == 0 {
            switch byte {
            case 0x00...0x7F: return true
            case 0xC2...0xDF: needed = 1
            case 0xE0: needed = 2; lower = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: needed = 2
            case 0xED: needed = 2; upper = 0x9F
            case 0xF0: needed = 3; lower = 0x90
            case 0xF1...0xF3: needed = 3
            case 0xF4: needed = 3; upper = 0x8F
            default: return false
            }
            return true
        }
        guard byte >= lower, byte <= upper else { return false }
        lower = 0x80
        upper = 0xBF
        needed -= 1
        return true
    }
}

/// The limits on attachments both ends apply (the daemon's are the ones that count; the
/// client checks first to say so before uploading).
public enum AttachmentLimits {
    /// One text file.
    public static let maxTextBytes = 1 << 20
    /// One image (Anthropic's Messages API takes up to 5 MB per image).
    public static let maxImageBytes = 5 << 20
    /// Every attachment of one message together.
    public static let maxMessageBytes = 20 << 20
    /// Attachments on one message.
    public static let maxCount = 16
    /// Decoded bytes in one `blob.put` chunk (its base64 is a third more, well inside the line limit).
    public static let maxChunkBytes = 1 << 20
    /// A file name: bytes of UTF-8.
    public static let maxNameBytes = 255
}

/// RFC 4648 base64 (the standard alphabet, padded), the form `blob.put` and `attachment.get`
/// carry bytes in, and the form images take in a request (`data:` URLs, Anthropic's `image` blocks).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        let input = Array(bytes)
        var output: [UInt8] = []
        output.reserveCapacity((input.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= input.count {
            let value = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
            output += [alphabet[Int(value >> 18 & 63)], alphabet[Int(value >> 12 & 63)],
                       alphabet[Int(value >> 6 & 63)], alphabet[Int(value & 63)]]
            index += 3
        }
        let left = input.count - index
        if left == 1 {
            let value = UInt32(input[index]) << 16
            output += [alphabet[Int(value >> 18 & 63)], alphabet[Int(value >> 12 & 63)], 61, 61]
        } else if left == 2 {
            let value = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8
            output += [alphabet[Int(value >> 18 & 63)], alphabet[Int(value >> 12 & 63)], alphabet[Int(value >> 6 & 63)], 61]
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes of padded base64 `text`, or nil when it is not exactly that (no white space,
    /// no other alphabet, no missing padding, no bits set past the end).
    public static func decode(_ text: String) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(input.count / 4 * 3)
        var index = 0
        while index < input.count {
            let last = index + 4 == input.count
            let a = values[Int(input[index])], b = values[Int(input[index + 1])]
            guard a != 0xFF, b != 0xFF else { return nil }
            if last, input[index + 2] == 61 {
                guard input[index + 3] == 61, b & 0x0F == 0 else { return nil }
                output.append(a << 2 | b >> 4)
                return output
            }
            let c = values[Int(input[index + 2])]
            guard c != 0xFF else { return nil }
            if last, input[index + 3] == 61 {
                guard c & 0x03 == 0 else { return nil }
                output += [a << 2 | b >> 4, b << 4 | c >> 2]
                return output
            }
            let d = values[Int(input[index + 3])]
            guard d != 0xFF else { return nil }
            output += [a << 2 | b >> 4, b << 4 | c >> 2, c << 6 | d]
            index += 4
        }
        return output
    }
}
