import ConfabProtocol
import Tools

extension SecretRedactor {
    /// The error with every secret gone from its message, and the start of one that a cut to
    /// the message's limit (its `…`) split.
    func redacting(_ error: MessageError) -> MessageError {
        MessageError(code: error.code, message: redactingMessage(error.message), status: error.status)
    }
}
