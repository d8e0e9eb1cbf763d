import ConfabProtocol
import Terminal

/// Tool calls and tool messages as the daemon sends them, read for `ToolCallFormat`, and
/// the reply chains they make: a reply `m2` that asks for tools is followed by its results
/// (`m2.1`, …) and the model's next turns (`m2.3`, …), all one reply.
enum ToolLines {
    struct Call: Equatable {
        var id: String
        var name: String
        var arguments: String
    }

    /// A `{id, name, arguments}` object.
    static func call(_ json: JSON?) -> Call? {
        guard let id = json?["id"]?.string else { return nil }
        return Call(id: id, name: json?["name"]?.string ?? "?", arguments: json?["arguments"]?.string ?? "")
    }

    /// The calls an assistant message asked for, in order; none for any other message.
    static func calls(of message: JSON?) -> [Call] {
        guard message?["role"]?.string == "assistant" else { return [] }
        return (message?["tool_calls"]?.array ?? []).compactMap(call)
    }

    /// A reply turn that ends with calls, so that its reply goes on after them. A turn that
    /// failed (too many rounds of tools) keeps its calls for the record, and ends the reply.
    static func continuesAfter(_ message: JSON) -> Bool {
        !calls(of: message).isEmpty && (message["status"]?.string ?? "complete") == "complete"
    }

    static func isTool(_ message: JSON?) -> Bool { message?["role"]?.string == "tool" }

    static func callID(of message: JSON?) -> String? { message?["tool_call_id"]?.string }

    static func name(of message: JSON?) -> String { message?["name"]?.string ?? "?" }

    /// How a tool message's call went, or where it stands.
    static func outcome(of message: JSON) -> ToolCallFormat.Outcome {
        ToolCallFormat.Outcome(status: message["status"]?.string, errorCode: message["error"]?["code"]?.string,
                               errorMessage: message["error"]?["message"]?.string, httpStatus: message["http_status"]?.int,
                               durationMilliseconds: message["duration_ms"]?.int, approval: message["approval"]?.string)
    }

    /// `⚙ weather → 200 · 84 ms · {"temp":21,…}`
    static func result(_ message: JSON, width: Int) -> String {
        ToolCallFormat.result(name: name(of: message), outcome: outcome(of: message), content: message["content"]?.string,
                              httpStatus: message["http_status"]?.int, width: width)
    }

    /// `m2` for `m2`, `m2.1` and `m2.3`: the reply a message belongs to; nil for what is no message id.
    static func head(_ id: String) -> String? {
        MessageID.order(of: id).map { MessageID.make($0.sequence) }
    }

    /// The sequence number of the reply a message belongs to.
    static func sequence(_ id: String?) -> Int? {
        id.flatMap { MessageID.order(of: $0)?.sequence }
    }

    /// A message a reply's tool calls added (`m2.1`, `m2.2`…), not the reply's first.
    static func isStep(_ id: String?) -> Bool {
        (id.flatMap { MessageID.order(of: $0)?.step } ?? 0) > 0
    }
}
