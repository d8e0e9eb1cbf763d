import Foundation
import Glibc

/// Command-line settings; immutable once parsed and shared by every connection thread.
struct Config: Sendable {
    enum Family: Sendable { case v4, v6 }

    var host = "127.0.0.1"
    var family: Family = .v4
    var port: UInt16 = 0
    var apiKey: String?
    var logPath: String?
    /// Tests and benchmarks set one, so a fake they fail to stop still ends; the quick start's
    /// fake, started by hand, runs until it is stopped.
    var maxLifetimeSeconds: Double?
    var defaultDelayMs = 2
    var exitWithParent = false
    var models = ["fake-model", "fake-model-2"]
    var modelsFile: String?
    /// A 401 for a wrong key quotes the key that was sent, as some servers do.
    var echoKey = false
}

let usageText = """
    usage: confab-fake-upstream [options]

    A fake OpenAI-compatible chat-completions server for tests (loopback only),
    with tool endpoints under /tool/ for the tools its replies ask for.

      --port N                 port to listen on (default 0 = ephemeral)
      --host ADDR              127.0.0.0/8 address or ::1 (default 127.0.0.1)
      --api-key KEY            require "Authorization: Bearer KEY" (else 401)
      --log FILE               append one JSON line per request to FILE
      --max-lifetime SECONDS   exit by itself after SECONDS (default: run until stopped)
      --default-delay-ms N     delay between streamed pieces (default 2)
      --exit-with-parent       also exit as soon as the parent process goes away
      --models A,B,...         the ids GET /models lists (default fake-model,fake-model-2)
      --models-file FILE       read at every GET /models, when it exists: ids one a line,
                               or "status N" (fail with N) or "raw" (the rest is the body),
                               after an optional first line "delay MS" (wait before answering)
      --echo-key               a 401 for a wrong key quotes the key that was sent
      -h, --help               show this help

    Prints "listening HOST PORT" on stdout once ready. See docs/fake-upstream.md.

    """

func writeFD(_ fd: Int32, _ text: String) {
    var text = text
    text.withUTF8 { buf in
        var off = 0
        while off < buf.count {
            let n = write(fd, buf.baseAddress! + off, buf.count - off)
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            off += n
        }
    }
}

func die(_ message: String, code: Int32 = 2) -> Never {
    writeFD(2, "confab-fake-upstream: \(message)\n")
    exit(code)
}

/// Validates a loopback host: anything in 127.0.0.0/8, or ::1. Returns the canonical text and family.
func loopbackHost(_ raw: String) -> (String, Config.Family)? {
    var text = raw
    if text == "localhost" { text = "127.0.0.1" }
    if text.hasPrefix("[") && text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
    var v4 = in_addr()
    if inet_pton(AF_INET, text, &v4) == 1 {
        let firstOctet = UInt32(bigEndian: v4.s_addr) >> 24
        return firstOctet == 127 ? (text, .v4) : nil
    }
    var v6 = in6_addr()
    if inet_pton(AF_INET6, text, &v6) == 1 {
        var loop = in6_addr()
        _ = inet_pton(AF_INET6, "::1", &loop)
        let same = withUnsafeBytes(of: &v6) { a in withUnsafeBytes(of: &loop) { b in a.elementsEqual(b) } }
        return same ? ("::1", .v6) : nil
    }
    return nil
}

func parseArguments(_ arguments: [String]) -> Config {
    var config = Config()
    var index = 0
    while index < arguments.count {
        var arg = arguments[index]
        index += 1
        var inlineValue: String?
        if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
            inlineValue = String(arg[arg.index(after: eq)...])
            arg = String(arg[..<eq])
        }
        func value() -> String {
            if let v = inlineValue { return v }
            guard index < arguments.count else { die("\(arg) needs a value") }
            index += 1
            return arguments[index - 1]
        }
        switch arg {
        case "-h", "--help":
            writeFD(1, usageText)
            exit(0)
        case "--port":
            let v = value()
            guard let p = UInt16(v) else { die("invalid --port '\(v)'") }
            config.port = p
        case "--host":
            let v = value()
            guard let (host, family) = loopbackHost(v) else {
                die("--host must be a loopback address (127.0.0.0/8 or ::1), got '\(v)'")
            }
            config.host = host
            config.family = family
        case "--api-key":
            let v = value()
            guard !v.isEmpty else { die("--api-key must not be empty") }
            config.apiKey = v
        case "--log":
            config.logPath = value()
        case "--max-lifetime":
            let v = value()
            guard let s = Double(v), s > 0, s.isFinite else { die("invalid --max-lifetime '\(v)' (seconds > 0)") }
            config.maxLifetimeSeconds = s
        case "--default-delay-ms":
            let v = value()
            guard let ms = Int(v), ms >= 0 else { die("invalid --default-delay-ms '\(v)'") }
            config.defaultDelayMs = ms
        case "--exit-with-parent":
            if inlineValue != nil { die("--exit-with-parent takes no value") }
            config.exitWithParent = true
        case "--models":
            let v = value()
            let ids = v.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard !ids.contains(where: \.isEmpty) else { die("invalid --models '\(v)' (ids separated by commas)") }
            config.models = ids
        case "--models-file":
            config.modelsFile = value()
        case "--echo-key":
            if inlineValue != nil { die("--echo-key takes no value") }
            config.echoKey = true
        default:
            die("unknown argument '\(arg)' (try --help)")
        }
    }
    return config
}
