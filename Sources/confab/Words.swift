import ConfabProtocol

/// What the daemon reports, said in plain words for people.
enum Words {
    /// A failed reply's error: the HTTP status with the upstream's own text, and libcurl's
    /// phrases turned into what they mean. `detailed: false` leaves the upstream's text out
    /// (a retry's status line); else only its first line, at most `detailLimit` characters,
    /// is said: the whole of it stays in the message's `error` (confab show) and the daemon's log.
    static func replyError(_ error: MessageError?, detailed: Bool = true) -> String {
        guard let error else { return "unknown error" }
        let detail = detailed ? firstLine(error.message) : ""
        let http = error.status.map { "HTTP \($0)" }
        func with(_ text: String, _ parts: String?...) -> String {
            let extra = parts.compactMap { $0 }.filter { !$0.isEmpty }
            return extra.isEmpty ? text : text + " (" + extra.joined(separator: ": ") + ")"
        }
        switch error.code {
        case .rateLimited: return with("the model server is rate limiting requests", http ?? "HTTP 429", detail)
        case .upstreamAuth: return with("the model server refused the API key", http, detail)
        case .upstreamHTTP: return with("the model server answered with an error", http, detail)
        case .upstreamError: return with("the model server reported an error mid-reply", detail)
        case .upstreamConnection: return connection(detail)
        case .upstreamTimeout: return with("the model server stopped sending", detail)
        case .upstreamProtocol: return protocolProblem(detail)
        case .notConfigured: return with("confabd has no API key for the model server", detail)
        case .storage: return with("confabd could not save the reply", detail)
        case .contextTooLarge: return with("the message does not fit in the conversation's context budget", detail)
        case .toolRounds: return with("the model kept asking for tools past the limit of rounds", detail)
        // The daemon's message already says it all: how many tokens, and what to change.
        case .thinkingExhausted: return detail.isEmpty ? "the model spent its whole token limit thinking and wrote no answer" : detail
        case .toolArguments: return with("the model's arguments for the tool were not valid", detail)
        case .toolUnavailable: return with("the model asked for a tool this conversation does not offer", detail)
        case .toolDenied: return with("the tool call was denied", detail)
        case .toolTimeout: return with("the tool did not answer in time", detail)
        case .toolConnection: return with("the tool's server could not be reached", detail)
        case .toolError: return with("the tool reported an error", detail)
        }
    }

    /// How much of a server's own text an error line carries.
    static let detailLimit = 200

    /// The first non-blank line of `text`, cut to `detailLimit` characters; `…` says more was left out.
    static func firstLine(_ text: String) -> String {
        let lines = text.split(whereSeparator: \.isNewline).map { String($0).trimmingWhitespace }.filter { !$0.isEmpty }
        guard var line = lines.first else { return "" }
        var cut = lines.count > 1
        if line.count > detailLimit {
            line = String(line.prefix(detailLimit))
            cut = true
        }
        return cut ? line + " …" : line
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
    static func clientName(_ client: ClientInfo?) -> String {
        guard let client else { return "someone" }
        if client.name.isEmpty && client.login.isEmpty { return client.id.isEmpty ? "someone" : client.id }
        return person(name: client.name, login: client.login)
    }

    /// The owner took this user's share of a conversation away.
    static func unshared(by owner: ClientInfo?) -> String {
        (owner.map { "\(clientName($0)), the owner," } ?? "the owner") + " stopped sharing the conversation with you"
    }

    /// Who wrote a person's message: the name they gave, with their login beside it.
    static func authorName(_ message: Message) -> String {
        guard let author = message.author else { return Role.user.rawValue }
        return person(name: author.name, login: author.login)
    }

    /// A display name is chosen by whoever connects, so the login the kernel vouches for
    /// stands beside it (`Build Bot (bob)`) unless the name already starts with it (the default
    /// `bob@pts/3`, or `bob` itself).
    static func person(name: String, login: String) -> String {
        PersonName.shown(name: name, login: login)
    }

    /// `1 message`, `2 messages`.
    static func count(_ number: Int, _ noun: String) -> String {
        "\(number) \(noun)\(number == 1 ? "" : "s")"
    }
}
