import ConfabProtocol

/// What the daemon reports, said in plain words for people.
enum Words {
    /// A failed reply's error (`{code, message, status}`): the HTTP status with the
    /// upstream's own text, and libcurl's phrases turned into what they mean.
    static func replyError(_ error: JSON?) -> String {
        let code = error?["code"]?.string ?? ""
        let detail = error?["message"]?.string ?? ""
        let status = error?["status"]?.int
        let http = status.map { "HTTP \($0)" }
        func with(_ text: String, _ parts: String?...) -> String {
            let extra = parts.compactMap { $0 }.filter { !$0.isEmpty }
            return extra.isEmpty ? text : text + " (" + extra.joined(separator: ": ") + ")"
        }
        switch code {
        case "rate_limited": return with("the model server is rate limiting requests", http ?? "HTTP 429", detail)
        case "upstream_auth": return with("the model server refused the API key", http, detail)
        case "upstream_http": return with("the model server answered with an error", http, detail)
        case "upstream_error": return with("the model server reported an error mid-reply", detail)
        case "upstream_connection": return connection(detail)
        case "upstream_timeout": return with("the model server stopped sending", detail)
        case "upstream_protocol": return protocolProblem(detail)
        case "not_configured": return with("confabd has no API key for the model server", detail)
        case "storage": return with("confabd could not save the reply", detail)
        case "context_too_large": return with("the message does not fit in the conversation's context budget", detail)
        case "tool_rounds": return with("the model kept asking for tools past the limit of rounds", detail)
        case "tool_arguments": return with("the model's arguments for the tool were not valid", detail)
        case "tool_unavailable": return with("the model asked for a tool this conversation does not offer", detail)
        case "tool_denied": return with("the tool call was denied", detail)
        case "tool_timeout": return with("the tool did not answer in time", detail)
        case "tool_connection": return with("the tool's server could not be reached", detail)
        default: return detail.isEmpty ? "unknown error" : detail
        }
    }

    /// libcurl's words for a failed connection, as a person would say them.
    static func connection(_ detail: String) -> String {
        let text = detail.lowercased()
        let plain: String
        if text.contains("resolve") {
            plain = "the model server's host name could not be found"
        } else if text.contains("couldn't connect") || text.contains("connection refused") || text.contains("failed to connect") {
            plain = "the model server could not be reached (nothing answered at its address)"
        } else if text.contains("timed out") || text.contains("timeout") {
            plain = "the model server did not answer in time"
        } else if text.contains("ssl") || text.contains("tls") || text.contains("certificate") {
            plain = "the secure connection to the model server failed"
        } else if closedEarly(text) {
            plain = "the connection to the model server closed before the reply finished"
        } else {
            plain = "the connection to the model server failed"
        }
        return detail.isEmpty ? plain : "\(plain) (\(detail))"
    }

    static func protocolProblem(_ detail: String) -> String {
        let text = detail.lowercased()
        if closedEarly(text) || text.contains("ended the stream before") {
            return "the connection to the model server closed before the reply finished"
                + (detail.isEmpty || text.contains("ended the stream before") ? "" : " (\(detail))")
        }
        return "the model server's answer could not be read" + (detail.isEmpty ? "" : " (\(detail))")
    }

    private static func closedEarly(_ text: String) -> Bool {
        text.contains("transfer closed") || text.contains("partial file") || text.contains("connection reset")
            || text.contains("recv failure") || text.contains("failure when receiving") || text.contains("empty reply")
    }

    /// `ana@pts/3`, or what of it the client object has.
    static func clientName(_ client: JSON?) -> String {
        client?["name"]?.string ?? client?["login"]?.string ?? client?["id"]?.string ?? "someone"
    }

    /// `1 message`, `2 messages`.
    static func count(_ number: Int, _ noun: String) -> String {
        "\(number) \(noun)\(number == 1 ? "" : "s")"
    }
}
