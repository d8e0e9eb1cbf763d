import ConfabProtocol
import Tools

extension SecretRedactor {
    /// The error with every secret gone from its message.
    func redacting(_ error: MessageError) -> MessageError {
        MessageError(code: error.code, message: redacting(error.message), status: error.status)
    }
}
