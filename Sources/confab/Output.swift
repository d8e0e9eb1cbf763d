#if canImport(Glibc)
import Glibc
#endif
import ConfabProtocol
import Posix
import Terminal

/// Why a command stopped early, and how it tells the user.
enum Failure: Error {
    /// The socket could not be connected: exit 3.
    case unreachable(path: String, errno: Int32)
    /// The socket is not one we may talk to (another user's, or in a directory that is not
    /// ours alone): exit 3, as for no daemon at all, since ours is not there.
    case refused(String)
    /// The daemon answered a request with an error: exit 1.
    case rpc(RPCError)
    /// The daemon closed the connection (or it broke) before we were done: exit 1.
    case disconnected
    /// Anything else worth a line on stderr: exit 1.
    case message(String)
    /// The command line made no sense: exit 2.
    case usage(String, command: String)
    /// Leave quietly with this status (what was to be said has been said).
    case exit(Int32)

    func report() -> Never {
        switch self {
        case .unreachable(let path, let code):
            Out.error("cannot reach confabd at \(path): \(errorText(code)) (is it running? start it with: confabd)")
            Out.exit(3)
        case .refused(let text):
            Out.error(text)
            Out.exit(3)
        case .rpc(let error):
            Out.error(error.message)
            Out.exit(1)
        case .disconnected:
            Out.error("confabd closed the connection")
            Out.exit(1)
        case .message(let text):
            Out.error(text)
            Out.exit(1)
        case .usage(let text, let command):
            Out.errorLine("Error: \(text)\nSee 'confab \(command) --help'.")
            Out.exit(2)
        case .exit(let status):
            Out.exit(status)
        }
    }
}

func errorText(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "error \(code)" }
    return String(cString: text)
}

/// Unbuffered output straight to the file descriptors: every piece of a streamed reply
/// must show up as soon as it arrives, and nothing is left in a buffer at exit.
enum Out {
    /// Writes all of `bytes`, riding out EINTR and short writes. Returns the errno on failure.
    @discardableResult
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        Files.writeAll(fd, bytes).failure
    }

    /// Standard output. A reader that went away (`confab ask … | head`) ends us the way
    /// it ends any other filter: by SIGPIPE, which is ignored only for the socket's sake.
    static func stdout(_ text: String) {
        var text = text
        let failure = text.withUTF8 { writeAll(1, UnsafeRawBufferPointer($0)) }
        if let failure { stdoutFailed(failure) }
    }

    static func stdout(_ bytes: [UInt8]) {
        let failure = bytes.withUnsafeBytes { writeAll(1, $0) }
        if let failure { stdoutFailed(failure) }
    }

    private static func stdoutFailed(_ code: Int32) -> Never {
        if code == EPIPE {
            signal(SIGPIPE, SIG_DFL)
            raise(SIGPIPE)
        }
        errorLine("confab: cannot write to standard output: \(errorText(code))")
        exit(1)
    }

    /// A line on stderr. Error texts carry what the upstream or the daemon said, so they
    /// are made safe for a terminal; on a terminal they wrap between words.
    /// With `red`, in red: the colour is ours, added after the text is made safe.
    static func errorLine(_ text: String, red: Bool = false) {
        var line = SafeText.sanitized(text)
        if let columns = TerminalSize.of(2)?.columns { line = TextRows.wrapped(line, width: columns, indent: 2) }
        if red { line = "\u{1B}[31m" + line + "\u{1B}[0m" }
        line += "\n"
        _ = line.withUTF8 { writeAll(2, UnsafeRawBufferPointer($0)) }
    }

    /// A JSON value and a line end on stdout, every control character escaped (`--json` is
    /// read on terminals too; see `JSON.terminalSafeText`).
    static func json(_ value: JSON) { stdout(value.terminalSafeText + "\n") }

    /// `confab: <text>` on stderr.
    static func error(_ text: String) { errorLine("confab: \(text)") }

    static func exit(_ status: Int32) -> Never { Glibc.exit(status) }
}

// MARK: - Time

enum LocalTime {
    private static func parts(_ time: Timestamp) -> tm {
        var seconds = time_t(time.milliseconds >= 0 ? time.milliseconds / 1000 : (time.milliseconds - 999) / 1000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        return parts
    }

    static func pad2(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }

    /// `HH:MM`
    static func clock(_ time: Timestamp) -> String {
        let p = parts(time)
        return "\(pad2(p.tm_hour)):\(pad2(p.tm_min))"
    }

    /// `YYYY-MM-DD HH:MM`
    static func dateAndClock(_ time: Timestamp) -> String {
        let p = parts(time)
        return "\(p.tm_year + 1900)-\(pad2(p.tm_mon + 1))-\(pad2(p.tm_mday)) \(pad2(p.tm_hour)):\(pad2(p.tm_min))"
    }

    static func parse(_ value: JSON?) -> Timestamp {
        value?.string.flatMap(Timestamp.init(rfc3339:)) ?? Timestamp.now()
    }
}

// MARK: - Environment

enum Environment {
    static func get(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
    }
}

extension String {
    var isBlank: Bool { unicodeScalars.allSatisfy { $0.properties.isWhitespace } }
}
