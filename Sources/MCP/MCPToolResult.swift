import ConfabProtocol

/// A `tools/call` result as the model is given it: the text parts joined by newlines,
/// `structuredContent` as JSON text when no text part renders it (the specification asks
/// servers to send its serialized form as text too), images, audio and resources described rather than
/// dropped; `isError` says the tool itself failed, which the model is told as a failed result.
public struct MCPToolResult: Sendable, Equatable {
    public var text: String
    public var isError: Bool

    public init(text: String, isError: Bool) {
        self.text = text
        self.isError = isError
    }

    public init(_ result: JSON) {
        isError = result["isError"]?.bool ?? false
        var parts: [String] = []
        var texts: [String] = []
        for part in result["content"]?.array ?? [] {
            let type = part["type"]?.string ?? ""
            switch type {
            case "text":
                let value = part["text"]?.string ?? ""
                texts.append(value)
                parts.append(value)
            case "image", "audio":
                let mime = part["mimeType"]?.string ?? "unknown type"
                let size = (part["data"]?.string?.utf8.count ?? 0) * 3 / 4
                parts.append("[\(type) (\(mime), about \(size) bytes) not shown]")
            case "resource_link":
                let name = part["name"]?.string ?? part["title"]?.string ?? ""
                let uri = part["uri"]?.string ?? ""
                parts.append("[resource link: \(name.isEmpty ? uri : "\(name) <\(uri)>")]")
            case "resource":
                let resource = part["resource"]
                let uri = resource?["uri"]?.string ?? ""
                if let text = resource?["text"]?.string {
                    parts.append("[resource \(uri)]\n\(text)")
                } else {
                    let mime = resource?["mimeType"]?.string ?? "unknown type"
                    parts.append("[resource \(uri) (\(mime), binary) not shown]")
                }
            default:
                parts.append("[content of type \"\(type)\" not shown]")
            }
        }
        // Servers send both for older clients: the text is the tool's own rendering of it
        // (FastMCP wraps a plain return as `{"result": …}` beside the plain text).
        if let structured = result["structuredContent"], texts.isEmpty {
            parts.append(structured.text)
        }
        text = parts.joined(separator: "\n")
    }
}
