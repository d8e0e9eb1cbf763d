// The client's side of attachments that needs no file system: the name a file is sent
// under, how its bytes are cut into `blob.put` chunks, and what is said when a file or a
// set of files cannot go (docs/protocol.md, "Attachments").

/// The name a file is sent under: its last path component, made into a name the daemon
/// takes (1 to 255 bytes of UTF-8, no control, format or separator characters).
public enum AttachmentName {
    /// `~/shots/diagram.png` → `diagram.png`. A character the daemon refuses in a name (an
    /// ESC, a bidi override, a line break) is written as a visible stand-in (`^[`, `<U+202E>`),
    /// so a file named to fool a terminal is still sent, under a name that cannot; a name
    /// past 255 bytes is shortened before its extension.
    public static func reduced(fromPath path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        let last = trimmed.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? String(trimmed)
        var visible = String.UnicodeScalarView()
        for scalar in last.unicodeScalars {
            if isRefused(scalar) {
                visible.append(contentsOf: standIn(for: scalar).unicodeScalars)
            } else {
                visible.append(scalar)
            }
        }
        return shortened(String(visible), toBytes: AttachmentLimits.maxNameBytes)
    }

    /// Whether the daemon refuses `scalar` in a name: controls, format characters (the bidi
    /// overrides and isolates, zero-width ones), the line and paragraph separators, and what a
    /// terminal draws as nothing or as a blank (the default-ignorable code points, U+2800).
    public static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: return true
        default: return scalar.properties.isDefaultIgnorableCodePoint || scalar.value == 0x2800
        }
    }

    /// As a terminal-safe text shows it: `^[` for ESC, `^?` for DEL, `M-^[` for a C1 control,
    /// `<U+202E>` for the rest.
    static func standIn(for scalar: Unicode.Scalar) -> String {
        let value = scalar.value
        switch value {
        case 0..<0x20: return "^" + String(Unicode.Scalar(UInt8(value) + 0x40))
        case 0x7F: return "^?"
        case 0x80...0x9F: return "M-^" + String(Unicode.Scalar(UInt8(value - 0x80) + 0x40))
        default:
            let digits = String(value, radix: 16, uppercase: true)
            return "<U+" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits + ">"
        }
    }

    /// `name` in at most `limit` bytes of UTF-8, cut on a character boundary before its
    /// extension (a short one, kept whole) when it is longer.
    static func shortened(_ name: String, toBytes limit: Int) -> String {
        guard name.utf8.count > limit else { return name }
        var stem = Substring(name)
        var suffix = ""
        if let dot = name.lastIndex(of: "."), dot != name.startIndex, name.utf8[dot...].count <= 16 {
            stem = name[..<dot]
            suffix = String(name[dot...])
        }
        let room = limit - suffix.utf8.count - "…".utf8.count
        var kept = ""
        for character in stem {
            guard kept.utf8.count + character.utf8.count <= room else { break }
            kept.append(character)
        }
        return kept + "…" + suffix
    }
}

/// The `blob.put` chunks of a file: byte ranges of at most `AttachmentLimits.maxChunkBytes`,
/// one empty range for an empty file (a final chunk may be empty).
public enum AttachmentChunks {
    public static func ranges(count: Int, chunk: Int = AttachmentLimits.maxChunkBytes) -> [Range<Int>] {
        guard count > 0 else { return [0..<0] }
        return stride(from: 0, to: count, by: chunk).map { $0..<min(count, $0 + chunk) }
    }
}

/// Why a file, or the files of one message, cannot be attached: each says which file and
/// why, and what to do when there is something to do.
public enum AttachmentProblem: Error, Equatable, Sendable, CustomStringConvertible {
    case missing(path: String)
    case directory(path: String)
    case unreadable(path: String, reason: String)
    /// Neither text nor an image of a kind the protocol takes; `why` from `AttachmentType.refusal`.
    case unknownType(path: String, why: String)
    /// `size` nil: more than the limit, how much more unknown (a pipe).
    case tooBig(path: String, size: Int?, type: AttachmentType)
    case tooMany(count: Int)
    case messageTooBig(total: Int)

    public var description: String {
        switch self {
        case .missing(let path):
            return "cannot attach \(path): no such file"
        case .directory(let path):
            return "cannot attach \(path): it is a directory (attach the files in it one by one)"
        case .unreadable(let path, let reason):
            return "cannot attach \(path): cannot read it (\(reason))"
        case .unknownType(let path, let why):
            return "cannot attach \(path): \(why)"
        case .tooBig(let path, let size, let type):
            let limit = Self.limit(for: type)
            let kind = type.isImage ? "an image" : "a text file"
            let measured = size.map { "it is \(ByteSize.text($0))" } ?? "it is longer than that"
            return "cannot attach \(path): \(kind) may be at most \(ByteSize.text(limit)), and \(measured)"
        case .tooMany(let count):
            return "cannot attach \(count) files to one message: at most \(AttachmentLimits.maxCount)"
        case .messageTooBig(let total):
            return "cannot attach these files to one message: together they pass \(ByteSize.text(AttachmentLimits.maxMessageBytes)) "
                + "(at least \(ByteSize.text(total)))"
        }
    }

    public static func limit(for type: AttachmentType) -> Int {
        type.isImage ? AttachmentLimits.maxImageBytes : AttachmentLimits.maxTextBytes
    }

    /// What is wrong with files of these sizes on one message, or nil: too many, or too
    /// much together.
    public static func ofMessage(sizes: [Int]) -> AttachmentProblem? {
        if sizes.count > AttachmentLimits.maxCount { return .tooMany(count: sizes.count) }
        let total = sizes.reduce(0, +)
        if total > AttachmentLimits.maxMessageBytes { return .messageTooBig(total: total) }
        return nil
    }
}

/// A number of bytes as people read it: `512 B`, `3.4 KiB`, `212 KiB`, `1.5 MiB`.
public enum ByteSize {
    public static func text(_ bytes: Int) -> String {
        let units = ["KiB", "MiB", "GiB"]
        guard bytes >= 1024 else { return "\(max(0, bytes)) B" }
        var unit = 0
        var scale = 1024
        while unit < units.count - 1, bytes >= scale * 1024 {
            scale *= 1024
            unit += 1
        }
        // Tenths below 10 of a unit, whole units above, rounded down so that a size never reads
        // as more than it is; a whole number of units has no tenths (the limits read `1 MiB`,
        // a file a byte past one `1.0 MiB`).
        if bytes < 10 * scale {
            let tenths = bytes * 10 / scale
            if tenths % 10 == 0, bytes % scale == 0 { return "\(tenths / 10) \(units[unit])" }
            return "\(tenths / 10).\(tenths % 10) \(units[unit])"
        }
        return "\(bytes / scale) \(units[unit])"
    }
}
