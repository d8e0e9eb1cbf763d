import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A tmux server of our own (a private socket in a temporary directory, no user config)
/// for driving the real client in a real terminal: keys go in with `send-keys`, the
/// screen comes out with `capture-pane`. Every wait is for a condition, with a deadline.
final class Tmux {
    let directory: String
    let socket: String
    private(set) var sessions = 0

    init(directory: String) {
        self.directory = directory
        socket = directory + "/tmux.sock"
    }

    /// Runs tmux with our socket; its standard output. Spawned and reaped by hand: the
    /// server a tmux client forks stays behind, and Foundation's Process never saw such a
    /// client end.
    @discardableResult
    func run(_ arguments: [String]) throws -> String {
        let outPath = directory + "/tmux.out", errPath = directory + "/tmux.err"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "TMUX")
        environment["TERM"] = "xterm-256color"
        let argv = (["/usr/bin/tmux", "-S", socket, "-f", "/dev/null"] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/usr/bin/tmux", &actions, nil, argv, envp)
        guard spawned == 0 else { throw HarnessError(description: "cannot run tmux: \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let data = FileManager.default.contents(atPath: outPath) ?? Data()
        let errors = FileManager.default.contents(atPath: errPath) ?? Data()
        if status != 0 {
            throw HarnessError(description: "tmux \(arguments.joined(separator: " ")): \(String(decoding: errors, as: UTF8.self))")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// A new detached pane running `command` (through sh), `width`×`height`. When the
    /// command ends the pane shows `[exit N]` and stays, so its last screen can be read.
    /// Returns the pane's target.
    func start(_ command: String, environment: [String: String] = [:], width: Int = 100, height: Int = 30) throws -> String {
        if sessions == 0 {
            // A session that outlives every test pane keeps the server up, and a pane whose
            // program ends stays on screen to be read.
            try run(["new-session", "-d", "-s", "keep", "/bin/sh", "-c", "exec sleep 600"])
            try run(["set-option", "-g", "remain-on-exit", "on"])
        }
        sessions += 1
        let name = "s\(sessions)"
        var exports = ""
        for (key, value) in environment.sorted(by: { $0.key < $1.key }) {
            exports += "export \(key)=\(Self.quoted(value)); "
        }
        // The shell around the command must outlive a Ctrl-C sent to it, as an
        // interactive shell does; a trap with a command is reset for the command itself.
        let script = "trap : INT; \(exports)\(command); echo \"[exit $?]\"; exec sleep 600"
        try run(["new-session", "-d", "-s", name, "-x", String(width), "-y", String(height), "/bin/sh", "-c", script])
        return name
    }

    static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    /// Keys as tmux names them (`Enter`, `C-c`, `Left`) or, with `literal`, text typed as is.
    func send(_ target: String, _ keys: [String], literal: Bool = false) throws {
        try run(["send-keys", "-t", target] + (literal ? ["-l"] : []) + keys)
    }

    func type(_ target: String, _ text: String) throws { try send(target, [text], literal: true) }

    /// Text pasted the way a terminal pastes it: bracketed when the application asked for it.
    func paste(_ target: String, _ text: String) throws {
        try run(["set-buffer", "-b", "confab-test", text])
        try run(["paste-buffer", "-p", "-d", "-b", "confab-test", "-t", target])
    }

    /// The visible screen, one string per row, trailing blanks cut. With `escapes`, the
    /// attributes (colours) are included as escape sequences.
    func screen(_ target: String, escapes: Bool = false) throws -> String {
        try run(["capture-pane", "-p", "-t", target] + (escapes ? ["-e"] : []))
    }

    func format(_ target: String, _ format: String) throws -> String {
        try run(["display-message", "-p", "-t", target, format]).trimmingCharacters(in: .newlines)
    }

    /// Waits until `condition` holds for the screen; returns that screen. Fails the test with
    /// the last screen seen when it never does.
    @discardableResult
    func waitForScreen(_ target: String, timeout: Double = 15, file: StaticString = #filePath, line: UInt = #line,
                       _ description: String, until condition: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var last = ""
        while Date() < deadline {
            last = try screen(target)
            if condition(last) { return last }
            usleep(20_000)
        }
        XCTFail("timed out waiting for \(description); screen:\n\(last)", file: file, line: line)
        throw HarnessError(description: "timed out waiting for \(description)")
    }

    @discardableResult
    func waitForText(_ target: String, _ text: String, timeout: Double = 15, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        try waitForScreen(target, timeout: timeout, file: file, line: line, "\"\(text)\"") { $0.contains(text) }
    }

    /// The pid of the program the pane runs (the shell around the command).
    func panePID(_ target: String) throws -> Int32 {
        Int32(try format(target, "#{pane_pid}")) ?? -1
    }

    func kill() {
        _ = try? run(["kill-server"])
    }
}

extension Harness {
    /// A command line for a pane: the built client with our socket.
    func confabCommand(_ arguments: [String]) -> String {
        ([Binaries.path("confab"), "--socket", socketPath] + arguments).map(Tmux.quoted).joined(separator: " ")
    }
}

/// A test of the real client in tmux panes, against a real confabd and the fake upstream.
class TmuxTestCase: XCTestCase {
    var harness: Harness!
    var tmux: Tmux!

    override func setUpWithError() throws {
        harness = try Harness()
        tmux = Tmux(directory: harness.directory)
    }

    override func tearDown() {
        tmux?.kill()
        harness?.tearDown()
    }
}
