import ConfabProtocol

/// How attachments read on a screen, a terminal's or a page's: the same line on both.
public enum AttachmentText {
    /// `diagram.png, 212 KiB, image/png`; the name is somebody's text and is shown escaped.
    public static func summary(name: String, size: Int, type: AttachmentType) -> String {
        "\(SafeText.singleLine(name)), \(ByteSize.text(size)), \(type.rawValue)"
    }

    /// `[attached: diagram.png, 212 KiB, image/png]`, under the message that carries it.
    public static func line(_ attachment: Attachment) -> String {
        "[attached: " + summary(name: attachment.name, size: attachment.size, type: attachment.type) + "]"
    }

    /// `[attached: diagram.png, 212 KiB, image/png, sha256 9f86d081884c]`, a line of an
    /// export: with enough of the digest to tell two versions of a file apart.
    public static func exported(_ attachment: Attachment) -> String {
        "[attached: \(SafeText.singleLine(attachment.name)), \(ByteSize.text(attachment.size)), \(attachment.type.rawValue), "
            + "sha256 \(attachment.sha256.prefix(12))]"
    }
}
