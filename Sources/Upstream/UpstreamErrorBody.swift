import ConfabProtocol

// MARK: - Error bodies

/// Best human-readable message from a non-2xx response body:
/// OpenAI style `{"error":{"message":..,"type":..,"code":..}}`, `{"error":"text"}`, `{"message":..}`,
/// `{"detail":..}` (string, FastAPI list of `{"msg":..}`, or object with `message`/`msg`);
/// otherwise the body text, trimmed and cut to 300 characters; an empty body gives "HTTP <status>".
/// Messages from JSON are cut to 1000 characters. The message is never empty.
public func upstreamErrorMessage(status: Int, body: [UInt8]) -> UpstreamErrorInfo {
    let text = trimmedSlice(String(decoding: body, as: UTF8.self))
    var type: String?
    var code: String?
    if let envelope = Envelope(String(text)) {
        if let error = envelope.error {
            type = error.type
            code = error.code
            if let message = nonBlank(error.message) {
                return UpstreamErrorInfo(message: capped(message, to: 1000), type: type, code: code)
            }
        }
        type = type ?? envelope.type
        code = code ?? envelope.code
        if let message = nonBlank(envelope.message) ?? nonBlank(envelope.detail) {
            return UpstreamErrorInfo(message: capped(message, to: 1000), type: type, code: code)
        }
    }
    if text.isEmpty {
        return UpstreamErrorInfo(message: "HTTP \(status)", type: type, code: code)
    }
    return UpstreamErrorInfo(message: capped(text, to: 300), type: type, code: code)
}
