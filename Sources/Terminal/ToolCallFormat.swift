/// The one-line forms of a tool call and of its result, as `attach`, `ask` and `show` print
/// them:
///
///     ⚙ weather {"city":"Paris"}
///     ⚙ weather {"city":"Paris"} needs your approval: /approve or /deny (or y/n)
///     ⚙ weather → 200 · 84 ms · {"temp":21,"sky":"clear"}
///     ⚙ weather ✗ tool_timeout: the tool did not answer within 10 s
///     ⚙ weather {"city":"Paris"} → 200 · 84 ms
///
/// Every name, argument, content and error text is the daemon's, the model's or a tool
/// server's: each is made one safe line (`SafeText.singleLine`) before it is measured. A line
/// wider than `width` columns gives up the content's preview first, then the arguments, and
/// is cut with `…` only when its fixed parts do not fit either.
public enum ToolCallFormat {
    public static let mark = "⚙"

    /// Where a call stands, or how it ended.
    public enum Outcome: Equatable, Sendable {
        /// The tool answered, with any HTTP status.
        case answered(httpStatus: Int?, durationMilliseconds: Int?)
        /// It gave no answer: the error's code and message.
        case failed(code: String, message: String)
        /// A person said no, or nobody answered in time.
        case denied
        case cancelled
        case interrupted
        case running
        case waitingForApproval

        /// From a tool message's fields: `status`, `error.code` and `error.message`,
        /// `http_status`, `duration_ms` and `approval`.
        public init(status: String?, errorCode: String? = nil, errorMessage: String? = nil, httpStatus: Int? = nil,
                    durationMilliseconds: Int? = nil, approval: String? = nil) {
            switch status {
            case "complete"?: self = .answered(httpStatus: httpStatus, durationMilliseconds: durationMilliseconds)
            case "streaming"?: self = approval == "pending" ? .waitingForApproval : .running
            case "cancelled"?: self = .cancelled
            case "interrupted"?: self = .interrupted
            default:
                if errorCode == "tool_denied" {
                    self = .denied
                } else {
                    self = .failed(code: errorCode ?? status ?? "failed", message: errorMessage ?? "")
                }
            }
        }

        /// It will not change any more.
        public var isFinal: Bool { self != .running && self != .waitingForApproval }

        /// It ended without an answer from the tool.
        public var isFailure: Bool {
            switch self {
            case .failed, .denied: return true
            default: return false
            }
        }

        /// `→ 200 · 84 ms`, `✗ tool_timeout: why`, `✗ denied`, `… running`.
        public var text: String {
            switch self {
            case .answered(let status, let duration):
                let parts = [status.map(String.init), duration.map(ToolCallFormat.duration)].compactMap { $0 }
                return "→ " + (parts.isEmpty ? "answered" : parts.joined(separator: " · "))
            case .failed(let code, let message):
                let code = SafeText.singleLine(code)
                let message = SafeText.singleLine(message).trimmedSpaces
                return "✗ " + (message.isEmpty ? code : code + ": " + message)
            case .denied: return "✗ denied"
            case .cancelled: return "✗ cancelled"
            case .interrupted: return "✗ interrupted"
            case .running: return "… running"
            case .waitingForApproval: return "… waiting for approval"
            }
        }
    }

    /// `⚙ weather {"city":"Paris"}`: a call the model asked for.
    public static func call(name: String, arguments: String, width: Int) -> String {
        layout(name: name, arguments: arguments, status: "", detail: nil, width: width)
    }

    /// `⚙ weather {"city":"Paris"} needs your approval: /approve or /deny (or y/n)`, with
    /// `how` after the colon.
    public static func approvalRequest(name: String, arguments: String, how: String, width: Int) -> String {
        layout(name: name, arguments: arguments, status: "needs your approval: " + how, detail: nil, width: width)
    }

    /// `⚙ weather → 200 · 84 ms · {"temp":21,…}`: how a call went, with a preview of what the
    /// tool answered (`content`) when it answered.
    public static func result(name: String, outcome: Outcome, content: String?, httpStatus: Int? = nil, width: Int) -> String {
        var detail: String?
        if case .answered(let status, _) = outcome, let content {
            detail = preview(content, httpStatus: status ?? httpStatus)
        }
        return layout(name: name, arguments: nil, status: outcome.text, detail: detail, width: width)
    }

    /// `⚙ weather {"city":"Paris"} → 200 · 84 ms`: the call and how it went in one line,
    /// without the answer.
    public static func summary(name: String, arguments: String, outcome: Outcome, width: Int) -> String {
        layout(name: name, arguments: arguments, status: outcome.text, detail: nil, width: width)
    }

    /// `84 ms`, `1.2 s`, `12 s`.
    public static func duration(_ milliseconds: Int) -> String {
        if milliseconds < 1000 { return "\(max(0, milliseconds)) ms" }
        if milliseconds < 10_000 {
            let tenths = (milliseconds + 50) / 100
            return "\(tenths / 10).\(tenths % 10) s"
        }
        return "\((milliseconds + 500) / 1000) s"
    }

    /// The model's arguments on one line: JSON without the white space between its tokens
    /// (strings kept as written), anything else with its runs of white space made one space.
    /// At most `limit` characters are looked at; what is left out ends in `…`.
    public static func arguments(_ text: String, limit: Int = 2000) -> String {
        compact(text, limit: limit)
    }

    /// What a tool answered, as one line: JSON compacted as arguments are, other text's first
    /// non-blank line (with ` …` when more follows). A non-2xx answer's `HTTP <status>` line,
    /// which the daemon puts first, is left out: the status is shown beside it.
    public static func preview(_ content: String, httpStatus: Int?, limit: Int = 2000) -> String {
        var text = Substring(content)
        if let status = httpStatus, text.hasPrefix("HTTP \(status)") {
            let rest = text.dropFirst("HTTP \(status)".count)
            if rest.isEmpty || rest.first == "\n" || rest.first == "\r\n" { text = rest.dropFirst() }
        }
        if startsLikeJSON(text) { return compact(String(text), limit: limit) }
        let looked = text.prefix(limit)
        let lines = looked.split(whereSeparator: \.isNewline)
        guard let index = lines.firstIndex(where: { !$0.allSatisfy(\.isWhitespace) }) else { return "" }
        let first = SafeText.singleLine(String(lines[index])).trimmedSpaces
        let more = lines[(index + 1)...].contains { !$0.allSatisfy(\.isWhitespace) } || looked.endIndex != text.endIndex
        return more ? first + " …" : first
    }

    // MARK: Layout

    /// `⚙ NAME ARGUMENTS STATUS · DETAIL`, cut to `width`: the detail first, then the
    /// arguments, then the whole line.
    static func layout(name: String, arguments: String?, status: String, detail: String?, width: Int) -> String {
        let head = mark + " " + SafeText.singleLine(name)
        let compacted = arguments.map { compact($0, limit: 2000) } ?? ""
        let args = compacted.isEmpty ? "" : " " + compacted
        let tail = status.isEmpty ? "" : " " + status
        let more = (detail ?? "").isEmpty ? "" : " · " + detail!
        let whole = head + args + tail + more
        let width = max(1, width)
        if DisplayWidth.of(whole) <= width { return whole }
        // Room for at least a few characters of what is cut, and its `…`.
        let least = 5
        let fixed = DisplayWidth.of(head + args + tail)
        if !more.isEmpty, width - fixed >= least {
            return head + args + tail + DisplayWidth.truncate(more, to: width - fixed)
        }
        let bare = DisplayWidth.of(head + tail)
        if !args.isEmpty, width - bare >= least {
            return head + DisplayWidth.truncate(args, to: width - bare) + tail
        }
        return DisplayWidth.truncate(head + args + tail, to: width)
    }

    private static func startsLikeJSON(_ text: Substring) -> Bool {
        guard let first = text.first(where: { !$0.isWhitespace }) else { return false }
        return first == "{" || first == "["
    }

    /// One safe line of at most `limit` characters of `text` (see `arguments`).
    private static func compact(_ text: String, limit: Int) -> String {
        let looked = text.prefix(limit)
        let cut = looked.endIndex != text.endIndex
        var out = String.UnicodeScalarView()
        if startsLikeJSON(looked) {
            var inString = false
            var escaped = false
            for scalar in looked.unicodeScalars {
                if inString {
                    out.append(scalar)
                    if escaped {
                        escaped = false
                    } else if scalar == "\\" {
                        escaped = true
                    } else if scalar == "\"" {
                        inString = false
                    }
                } else if scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" {
                    continue
                } else {
                    if scalar == "\"" { inString = true }
                    out.append(scalar)
                }
            }
        } else {
            var space = false
            for scalar in looked.unicodeScalars {
                if scalar.properties.isWhitespace {
                    space = !out.isEmpty
                } else {
                    if space { out.append(" ") }
                    space = false
                    out.append(scalar)
                }
            }
        }
        let line = SafeText.singleLine(String(out))
        return cut ? line + "…" : line
    }
}

extension String {
    /// Without spaces at either end (a line made by `SafeText.singleLine` has no other white space to trim).
    var trimmedSpaces: String {
        guard let first = firstIndex(where: { $0 != " " }), let last = lastIndex(where: { $0 != " " }) else { return "" }
        return String(self[first...last])
    }
}
