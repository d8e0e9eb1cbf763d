import Foundation

// What real model servers do that the plain fake does not: a server that checks assistant
// turns against its own schema (llama-cpp-python's, which refuses `"content": null` with a
// 500 and pydantic's many-line text), a proxy that answers a streamed request with one JSON
// body, and a server that answers a context it cannot take with an empty stream.

/// The forms of an assistant turn's `content` a strict server may refuse.
enum ContentForm: String, CaseIterable {
    case null
    case empty
    case absent
}

/// `[[strict-content]]` or `[[strict-content:FORMS]]` (FORMS: `null`, `empty`, `absent`,
/// comma-separated): the forms refused; `null` alone when no value is given.
func strictContentForms(_ value: String?) -> Set<ContentForm> {
    guard let value, !value.trimmingCharacters(in: .whitespaces).isEmpty else { return [.null] }
    return Set(value.lowercased().split(separator: ",").compactMap { ContentForm(rawValue: $0.trimmingCharacters(in: .whitespaces)) })
}

/// The refusal of the first assistant message whose `content` takes a refused form, as
/// llama-cpp-python's server words it (pydantic's validation error of the message model).
func strictContentRefusal(_ messages: [JSON], refusing forms: Set<ContentForm>) -> String? {
    for (position, message) in messages.enumerated() where message["role"]?.stringValue == "assistant" {
        let form: ContentForm
        switch message["content"] {
        case nil: form = .absent
        case .null?: form = .null
        case .string(let text)? where text.isEmpty: form = .empty
        default: continue
        }
        guard forms.contains(form) else { continue }
        return pydanticRefusal(of: form, position: position)
    }
    return nil
}

/// Seven lines, as pydantic writes two errors of one field.
private func pydanticRefusal(of form: ContentForm, position: Int) -> String {
    let url = "https://errors.pydantic.dev/2.11/v/"
    switch form {
    case .null:
        return """
            2 validation errors for ChatCompletionRequestAssistantMessage (messages.\(position))
            content.str
              Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]
                For further information visit \(url)string_type
            content.list[ChatCompletionRequestMessageContentPart]
              Input should be a valid list [type=list_type, input_value=None, input_type=NoneType]
                For further information visit \(url)list_type
            """
    case .empty:
        return """
            2 validation errors for ChatCompletionRequestAssistantMessage (messages.\(position))
            content.str
              String should have at least 1 character [type=string_too_short, input_value='', input_type=str]
                For further information visit \(url)string_too_short
            content.list[ChatCompletionRequestMessageContentPart]
              Input should be a valid list [type=list_type, input_value='', input_type=str]
                For further information visit \(url)list_type
            """
    case .absent:
        return """
            1 validation error for ChatCompletionRequestAssistantMessage (messages.\(position))
            content
              Field required [type=missing, input_value={'role': 'assistant', 'tool_calls': [...]}, input_type=dict]
                For further information visit \(url)missing
            """
    }
}

/// llama-cpp-python's answer to a request its handler failed on: 500 with the exception's text.
func llamaCppPythonErrorBody(_ message: String) -> String {
    JSON.object([
        ("error", .object([
            ("message", .string(message)),
            ("type", .string("internal_server_error")),
            ("param", .null),
            ("code", .null),
        ])),
    ]).encoded()
}

/// The validation text `[[validation-error]]` puts in a scripted failure's body instead of
/// "fake upstream error N".
let scriptedValidationError = """
    2 validation errors for ChatCompletionRequestAssistantMessage (messages.2)
    content.str
      Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]
        For further information visit https://errors.pydantic.dev/2.11/v/string_type
    content.list[ChatCompletionRequestMessageContentPart]
      Input should be a valid list [type=list_type, input_value=None, input_type=NoneType]
        For further information visit https://errors.pydantic.dev/2.11/v/list_type
    """

/// `[[empty-stream]]`: 200 `text/event-stream` whose body ends at once, with no event.
func sendEmptyEventStream(_ connection: Connection, keepAlive: Bool, split: Int?) -> Bool {
    let head = responseHead(status: 200, headers: [
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
        ("Transfer-Encoding", "chunked"),
        ("Connection", keepAlive ? "keep-alive" : "close"),
    ])
    guard connection.send(head) else { return false }
    var writer = ChunkedWriter(connection: connection, split: split)
    return writer.finish() && keepAlive
}

/// `[[refuse-images]]`: whether any turn's content holds an image, as a chat `image_url` part or
/// an Anthropic `image` block (a server that cannot decode the image, or takes none).
func holdsImage(_ messages: [JSON]) -> Bool {
    messages.contains { message in
        message["content"]?.arrayValue?.contains { part in
            let type = part["type"]?.stringValue
            return type == "image_url" || type == "image"
        } ?? false
    }
}

/// What `[[refuse-images]]` answers, as a server that could not decode an image words it.
let imageRefusalMessage = "Invalid image: the image data could not be decoded."
