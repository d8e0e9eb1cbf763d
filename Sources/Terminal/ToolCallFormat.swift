/// The one-line forms of a tool call and of its result, as `attach`, `ask` and `show` print
/// them:
///
///     ⚙ weather {"city":"Paris"}
///     ⚙ weather {"city":"Paris"} needs your approval: y/n, or /approve c1, /deny c1
///     ⚙ weather → 200 · 84 ms · {"temp":21,"sky":"clear"}
///     ⚙ weather ✗ tool_timeout: the tool did not answer within 10 s
///     ⚙ weather {"city":"Paris"} → 200 · 84 ms
///
/// Every name, argument, content and error text is the daemon's, the model's or a tool
/// server's: each is made one safe line (`SafeText.singleLine`) before it is measured.
///
/// Arguments are what a person approves, so none is ever left out: every key is shown, and
/// a long string value is shortened in its middle with its length said
/// (`"login page  …[2,110 characters]…  "`), so that it cannot push a later key out of
/// sight. A line wider than `width` columns wraps between words onto indented rows; only
/// the preview of what a tool answered is cut (with `…`), and left out when no room is left
/// for it on the last row.
public enum ToolCallFormat {
    public static let mark = "⚙"

    /// The longest string value shown whole in a call's line: longer ones keep their start
    /// and end around their length.
    public static let longestValueShown = 48

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

    /// `⚙ weather {"city":"Paris"} needs your approval: y/n, or /approve c1, /deny c1`, with
    /// `how` after the colon.
    public static func approvalRequest(name: String, arguments: String, how: String, width: Int) -> String {
        layout(name: name, arguments: arguments, status: "needs your approval: " + SafeText.singleLine(how), detail: nil, width: width)
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
    /// Every key is kept; a string (or a text that is not JSON) longer than `longestValue`
    /// characters keeps its start and end around `…[N characters]…`.
    public static func arguments(_ text: String, longestValue: Int = longestValueShown) -> String {
        compact(text, longestValue: longestValue)
    }

    /// The arguments whole, compacted as `arguments` does but with nothing shortened: for a
    /// person who asks to see the call in full.
    public static func fullArguments(_ text: String) -> String {
        compact(text, longestValue: nil)
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

    /// `⚙ NAME ARGUMENTS STATUS · DETAIL` in rows of `width`: wrapped between words (rows after
    /// the first indented), with the detail cut to what is left of the last row.
    static func layout(name: String, arguments: String?, status: String, detail: String?, width: Int) -> String {
        let head = mark + " " + SafeText.singleLine(name)
        let compacted = arguments.map { compact($0, longestValue: longestValueShown) } ?? ""
        let args = compacted.isEmpty ? "" : " " + compacted
        let tail = status.isEmpty ? "" : " " + status
        let width = max(1, width)
        var rows = TextRows.wrap(head + args + tail, width: width, indent: 2)
        if let detail, !detail.isEmpty, let last = rows.last {
            // Room for at least a few characters of what is cut, and its `…`.
            let least = 5
            let room = width - DisplayWidth.of(last) - DisplayWidth.of(" · ")
            if room >= least { rows[rows.count - 1] = last + " · " + DisplayWidth.truncate(detail, to: room) }
        }
        return rows.joined(separator: "\n")
    }

    /// `weather {"city":"Paris"} — allow? [y/N] `: the question `ask` puts on the terminal,
    /// wrapped to `width`, the cursor after it.
    public static func question(name: String, arguments: String, width: Int) -> String {
        let head = SafeText.singleLine(name)
        let compacted = compact(arguments, longestValue: longestValueShown)
        let text = head + (compacted.isEmpty ? "" : " " + compacted) + " — allow? [y/N]"
        return TextRows.wrapped(text, width: max(1, width - 1), indent: 2) + " "
    }

    private static func startsLikeJSON(_ text: Substring) -> Bool {
        guard let first = text.first(where: { !$0.isWhitespace }) else { return false }
        return first == "{" || first == "["
    }

    /// One safe line of at most `limit` characters of `text`, what is left out shown by `…`:
    /// for previews of a tool's answer.
    private static func compact(_ text: String, limit: Int) -> String {
        let looked = text.prefix(limit)
        let line = compact(String(looked), longestValue: nil)
        return looked.endIndex != text.endIndex ? line + "…" : line
    }

    /// One safe line of `text` (see `arguments`); with `longestValue`, long strings and long
    /// text that is not JSON shortened in their middle.
    private static func compact(_ text: String, longestValue: Int?) -> String {
        var out = String.UnicodeScalarView()
        if startsLikeJSON(Substring(text)) {
            var inString = false
            var escaped = false
            var string = String.UnicodeScalarView()
            for scalar in text.unicodeScalars {
                if inString {
                    if escaped {
                        escaped = false
                    } else if scalar == "\\" {
                        escaped = true
                    } else if scalar == "\"" {
                        inString = false
                        out.append(contentsOf: shortened(String(string), longestValue).unicodeScalars)
                        out.append(scalar)
                        string = String.UnicodeScalarView()
                        continue
                    }
                    string.append(scalar)
                } else if scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" {
                    continue
                } else {
                    if scalar == "\"" { inString = true }
                    out.append(scalar)
                }
            }
            // A string the text never closed.
            out.append(contentsOf: shortened(String(string), longestValue).unicodeScalars)
        } else {
            var space = false
            for scalar in text.unicodeScalars {
                if scalar.properties.isWhitespace {
                    space = !out.isEmpty
                } else {
                    if space { out.append(" ") }
                    space = false
                    out.append(scalar)
                }
            }
            // Text that is not JSON gets more room than one value.
            out = shortened(String(out), longestValue.map { $0 * 4 }).unicodeScalars
        }
        return SafeText.singleLine(String(out))
    }

    /// `text` when it has at most `longest` characters; else its start and end around
    /// `…[N characters]…`.
    static func shortened(_ text: String, _ longest: Int?) -> String {
        guard let longest else { return text }
        let count = text.count
        guard count > longest else { return text }
        let keep = max(2, longest / 2)
        let start = text.prefix(keep * 2 / 3)
        let end = text.suffix(keep - start.count)
        // A no-break space: the marker is read whole, never split over two rows.
        return start + "…[" + grouped(count) + "\u{A0}characters]…" + end
    }

    /// `2,110`: thousands set apart, for a length read at a glance.
    private static func grouped(_ number: Int) -> String {
        var digits = String(number)
        var groups: [Substring] = []
        while digits.count > 3 {
            groups.insert(digits.suffix(3), at: 0)
            digits.removeLast(3)
        }
        groups.insert(Substring(digits), at: 0)
        return groups.joined(separator: ",")
    }
}

extension String {
    /// Without spaces at either end (a line made by `SafeText.singleLine` has no other white space to trim).
    var trimmedSpaces: String {
        guard let first = firstIndex(where: { $0 != " " }), let last = lastIndex(where: { $0 != " " }) else { return "" }
        return String(self[first...last])
    }
}

extension ToolCallFormat {
    /// `⚙ weather {"city":"Paris"} waits for the owner's approval`: a call in a conversation
    /// shared with us, which only its owner may answer.
    public static func awaitingOwner(name: String, arguments: String, width: Int) -> String {
        layout(name: name, arguments: arguments, status: "waits for the owner's approval", detail: nil, width: width)
    }
}
