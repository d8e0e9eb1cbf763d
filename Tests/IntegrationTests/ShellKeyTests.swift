import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A tmux server of our own (private socket in the harness directory) running real shells.
final class ShellTmux {
    let socket: String
    private var started = false

    init(directory: String) { socket = directory + "/tmux.sock" }

    /// Runs a tmux command and returns what it printed.
    @discardableResult
    func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/tmux")
        process.arguments = ["-S", socket, "-f", "/dev/null"] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else { throw HarnessError(description: "tmux \(arguments) failed: \(text)") }
        return text
    }

    /// Runs a tmux command that may start the server. Not through Foundation's Process: the
    /// server would inherit what Process watches for the client's exit, and it never ends.
    func spawn(_ arguments: [String]) throws {
        let argv = ["/usr/bin/tmux", "-S", socket, "-f", "/dev/null"] + arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        var pid: pid_t = 0
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        let result = posix_spawn(&pid, argv[0], &actions, nil, &cArguments, environ)
        guard result == 0 else { throw HarnessError(description: "posix_spawn tmux: \(result)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else { throw HarnessError(description: "tmux \(arguments) failed: status \(status)") }
    }

    /// A window named `name` running `command` (argv).
    func open(_ name: String, _ command: [String]) throws {
        if started {
            try spawn(["new-window", "-d", "-t", "confab", "-n", name] + command)
        } else {
            try spawn(["new-session", "-d", "-s", "confab", "-n", name, "-x", "160", "-y", "40"] + command)
            started = true
        }
    }

    func type(_ window: String, _ text: String) throws { try run(["send-keys", "-t", "confab:" + window, "-l", text]) }
    func press(_ window: String, _ keys: String...) throws { try run(["send-keys", "-t", "confab:" + window] + keys) }
    func screen(_ window: String) throws -> String { try run(["capture-pane", "-p", "-t", "confab:" + window]) }

    func stop() {
        if started { try? spawn(["kill-server"]) }
    }
}

/// The shell-init snippets in real bash, zsh and fish, inside tmux, against confabd and the
/// fake upstream: the command key, Ctrl-C while it waits, the explain key, a conversation per
/// shell session, `??` and `--last`.
final class ShellKeyTests: XCTestCase {
    var harness: Harness!
    var tmux: ShellTmux!
    var work: String { harness.directory + "/work" }
    var bufferFile: String { harness.directory + "/buffer" }

    override func setUpWithError() throws {
        for shell in ["/usr/bin/tmux", "/usr/bin/bash", "/usr/bin/zsh", "/usr/bin/fish"] {
            guard FileManager.default.isExecutableFile(atPath: shell) else {
                throw HarnessError(description: "\(shell) is missing: make deps installs tmux, zsh and fish")
            }
        }
        harness = try Harness()
        tmux = ShellTmux(directory: harness.directory)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    }

    override func tearDown() {
        tmux?.stop()
        harness?.tearDown()
    }

    // MARK: The shells

    enum ShellKind: String { case bash, zsh, fish }

    /// Starts `shell` in window `name` with the snippet loaded, plus two test keys: Ctrl-T
    /// writes the edit buffer to `bufferFile`, Ctrl-O empties it.
    func start(_ shell: ShellKind, window name: String) throws {
        let home = harness.directory + "/home-" + name
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let confab = Binaries.path("confab")
        let runtime = harness.directory + "/run"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var command = ["env", "-i", "HOME=" + home, "PATH=/usr/bin:/bin", "TERM=xterm-256color", "LANG=C.UTF-8",
                       "CONFAB_SOCKET=" + harness.socketPath, "XDG_RUNTIME_DIR=" + runtime]
        switch shell {
        case .bash:
            let rc = """
                PS1='$ '
                eval "$('\(confab)' shell-init bash)"
                bind -x '"\\C-t": printf "%s" "$READLINE_LINE" > \(bufferFile)'
                bind -x '"\\C-o": READLINE_LINE= READLINE_POINT=0'
                cd '\(work)'
                """
            try rc.write(toFile: home + "/.bashrc", atomically: true, encoding: .utf8)
            command += ["/usr/bin/bash", "--rcfile", home + "/.bashrc", "-i"]
        case .zsh:
            let rc = """
                PS1='%% '
                eval "$('\(confab)' shell-init zsh)"
                __test_dump() { print -rn -- "$BUFFER" > \(bufferFile) }
                __test_clear() { BUFFER= }
                zle -N __test_dump; zle -N __test_clear
                bindkey '^T' __test_dump; bindkey '^O' __test_clear
                cd '\(work)'
                """
            try rc.write(toFile: home + "/.zshrc", atomically: true, encoding: .utf8)
            command += ["ZDOTDIR=" + home, "/usr/bin/zsh", "-i"]
        case .fish:
            let rc = """
                function fish_prompt; echo -n '> '; end
                function fish_greeting; end
                '\(confab)' shell-init fish | source
                function __test_dump; commandline | string collect > \(bufferFile); end
                function __test_clear; commandline ''; end
                bind \\ct __test_dump; bind \\co __test_clear
                cd '\(work)'
                """
            try FileManager.default.createDirectory(atPath: home + "/.config/fish", withIntermediateDirectories: true)
            try rc.write(toFile: home + "/.config/fish/config.fish", atomically: true, encoding: .utf8)
            command += ["/usr/bin/fish", "-i"]
        }
        try tmux.open(name, command)
        try waitForScreen(name, "prompt") { screen in
            let prompt = ["bash": "$", "zsh": "%", "fish": ">"][shell.rawValue]!
            return screen.split(separator: "\n").contains { $0.hasPrefix(prompt) }
        }
    }

    /// Types `text`, with each "\n" inserted into the buffer as a line break (not Enter).
    func typeLines(_ shell: ShellKind, _ window: String, _ text: String) throws {
        let lines = text.components(separatedBy: "\n")
        for (index, line) in lines.enumerated() {
            if index > 0 {
                switch shell {
                case .bash, .zsh: try tmux.press(window, "C-v", "C-j")
                case .fish: try tmux.press(window, "M-Enter")
                }
            }
            if !line.isEmpty { try tmux.type(window, line) }
        }
    }

    /// The edit buffer, exactly, as the shell's Ctrl-T writes it.
    func buffer(_ window: String) throws -> String {
        try? FileManager.default.removeItem(atPath: bufferFile)
        try tmux.press(window, "C-t")
        try waitFor("the buffer dump from \(window)") { FileManager.default.fileExists(atPath: self.bufferFile) }
        var text = ""
        // The shell may still be writing it: wait until two reads agree.
        try waitFor("a complete buffer dump") {
            let now = (try? String(contentsOfFile: self.bufferFile, encoding: .utf8)) ?? ""
            defer { text = now }
            return now == text && !now.isEmpty || now == text && text.isEmpty && self.quietFor(self.bufferFile)
        }
        return text.hasSuffix("\n") && !text.hasSuffix("\n\n") ? String(text.dropLast()) : text
    }

    private func quietFor(_ path: String) -> Bool {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              let modified = attributes[.modificationDate] as? Date else { return false }
        return Date().timeIntervalSince(modified) > 0.2
    }

    func waitFor(_ what: String, timeout: Double = 30, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return }
            usleep(50_000)
        }
        throw HarnessError(description: "timed out waiting for \(what)")
    }

    func waitForScreen(_ window: String, _ what: String, _ condition: (String) -> Bool) throws {
        var last = ""
        do {
            try waitFor("\(what) on \(window)") {
                last = try tmux.screen(window)
                return condition(last)
            }
        } catch {
            let others = (try? tmux.run(["list-windows", "-a"])) ?? ""
            throw HarnessError(description: "\(error); the screen:\n\(last)\nwindows:\n\(others)")
        }
    }

    /// The conversation ids the daemon has, with their message counts, by title.
    func conversations() throws -> [(id: String, title: String, count: Int)] {
        let client = try harness.client()
        defer { client.close() }
        let list = try client.call("conversation.list")
        return (list["conversations"]?.array ?? []).map {
            ($0["id"]?.string ?? "", $0["title"]?.string ?? "", $0["message_count"]?.int ?? 0)
        }
    }

    // MARK: The checks, the same for every shell

    /// Presses `key`, then Ctrl-T, which the shell runs only after the key's function
    /// returned: the dump is the buffer the key left.
    func bufferAfter(_ window: String, pressing key: String) throws -> String {
        try? FileManager.default.removeItem(atPath: bufferFile)
        try tmux.press(window, key)
        return try buffer(window)
    }

    /// The user messages of the conversations titled after the shell sessions.
    func sessionPrompts() throws -> [String] {
        let client = try harness.client()
        defer { client.close() }
        var prompts: [String] = []
        for conversation in try conversations() where conversation.title.hasSuffix(" " + work) {
            let history = try client.call("conversation.history", ["conversation": .string(conversation.id), "limit": 100])
            prompts += (history["messages"]?.array ?? []).filter { $0["role"]?.string == "user" }.compactMap { $0["content"]?.string }
        }
        return prompts
    }

    func checkShell(_ shell: ShellKind) throws {
        try start(shell, window: "one")

        // The command key: only the fenced block's command lands in the buffer, multi-line
        // as it was, and nothing runs.
        let description = "make two files [[reply:Sure, this does it:\n```sh\ntouch ran-one\ntouch ran-two\n```\nBoth are empty.]]"
        try typeLines(shell, "one", description)
        XCTAssertEqual(try bufferAfter("one", pressing: "M-a"), "touch ran-one\ntouch ran-two")
        XCTAssertFalse(FileManager.default.fileExists(atPath: work + "/ran-one"), "the key ran the command")

        // The explain key prints above the prompt and keeps the line.
        try tmux.press("one", "C-o")
        try tmux.type("one", "tar xzf a.tgz [[reply:It unpacks a.tgz here.]]")
        try tmux.press("one", "M-e")
        try waitForScreen("one", "the explanation") { screen in
            let lines = screen.split(separator: "\n")
            guard let explanation = lines.firstIndex(where: { $0.hasPrefix("It unpacks a.tgz here.") }) else { return false }
            return lines[(explanation + 1)...].contains { $0.contains("tar xzf a.tgz") } && !screen.contains("thinking")
        }
        XCTAssertEqual(try buffer("one"), "tar xzf a.tgz [[reply:It unpacks a.tgz here.]]")

        // A second shell session gets its own conversation; the first continues its own.
        try start(shell, window: "two")
        try tmux.type("two", "what now [[context]]")
        let second = try bufferAfter("two", pressing: "M-a")
        XCTAssertTrue(second.hasPrefix("context: user | "), second)
        try tmux.press("one", "C-o")
        try tmux.type("one", "and now [[context]]")
        // The context reply quotes this session's earlier messages, so its first fenced
        // block is the first reply's: only a continued conversation has it.
        XCTAssertEqual(try bufferAfter("one", pressing: "M-a"), "touch ran-one\ntouch ran-two")
        let sessions = try conversations().filter { $0.title.hasSuffix(" " + work) }
        XCTAssertEqual(sessions.map(\.count).sorted(), [2, 6], "\(sessions)")
        XCTAssertTrue(sessions.allSatisfy { $0.title.hasPrefix("pts/") }, "\(sessions)")

        // Ctrl-C while the key waits gives the line back untouched.
        try tmux.press("one", "C-o")
        let slow = "find big files [[words:400]] [[delay:50]]"
        try tmux.type("one", slow)
        try tmux.press("one", "M-a")
        try waitForScreen("one", "the spinner") { $0.contains("confab is thinking") }
        XCTAssertEqual(try bufferAfter("one", pressing: "C-c"), slow)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work + "/ran-one"))

        // ?? with --last: the last command line (not the one before) and its status go with
        // the question.
        try tmux.press("one", "C-o")
        for command in ["echo MARKER-ONE", "ls /nope-MARKER-TWO"] {
            try tmux.type("one", command)
            try tmux.press("one", "Enter")
        }
        try tmux.type("one", "?? --last why [[reply:Because it is not there.]]")
        try tmux.press("one", "Enter")
        let expected = "My previous command was:\nls /nope-MARKER-TWO\nIt exited with status 2.\n\nwhy [[reply:Because it is not there.]]"
        try waitFor("the question with the last command") { try self.sessionPrompts().contains(expected) }

        // The words of a question are never options, whatever they look like.
        let questions = ["explain git commit -m quickly please", "is rm -rf safe here", "what does grep -c do", "why --last -- --help"]
        for question in questions {
            try tmux.type("one", "?? " + question)
            try tmux.press("one", "Enter")
            try waitFor("the question \(question)") { try self.sessionPrompts().contains(question) }
        }
        // A * in the question is sent as it is, not as the directory's file names (fish cannot
        // stop it: its README line says to quote it); globbing works again afterwards.
        if shell != .fish {
            XCTAssertTrue(FileManager.default.createFile(atPath: work + "/globbed-file", contents: Data()))
            try tmux.type("one", "?? why does rm * fail")
            try tmux.press("one", "Enter")
            try waitFor("the question with its *") { try self.sessionPrompts().contains("why does rm * fail") }
            XCTAssertFalse(try sessionPrompts().contains { $0.contains("globbed-file") }, "?? expanded the * into file names")
            try tmux.type("one", "echo glob*-file > glob-after")
            try tmux.press("one", "Enter")
            try waitFor("globbing after ??") {
                (try? String(contentsOfFile: self.work + "/glob-after", encoding: .utf8)) == "globbed-file\n"
            }
        }
        let models = try harness.client().call("conversation.list")["conversations"]?.array?.compactMap { $0["model"]?.string } ?? []
        XCTAssertFalse(models.contains("quickly"), "asking configured the conversation: \(models)")
    }

    /// A model that thinks: the key's status line is its thinking row (the newest line of the
    /// thought) until the answer comes, then only the command is in the buffer.
    func testTheCommandKeyShowsTheThoughtWhileTheModelThinks() throws {
        try start(.bash, window: "one")
        try typeLines(.bash, "one", "list them [[think:weigh the flags]] [[think-delay:700]] [[reply:```sh\nls -la\n```]]")
        try tmux.press("one", "M-a")
        try waitForScreen("one", "the thinking row") { $0.contains("thinking… ") && $0.contains("weigh") }
        XCTAssertEqual(try buffer("one"), "ls -la")
        try waitForScreen("one", "the row gone") { !$0.contains("thinking") }
    }

    /// With a default profile that offers a tool, the command key follows the reply through
    /// its tool call to the turn that answers, as `ask` does, and inserts that turn's command.
    func testTheCommandKeyFollowsAToolChainToTheCommand() throws {
        try harness.writeConfig("""
            [tools.echo]
            description = "Echo what it is given"
            parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
            approval = "never"
            [tools.echo.request]
            method = "GET"
            url = "$UPSTREAM/tool/echo?x=1"

            [profiles.helper]
            tools = ["echo"]

            """, topLevel: "default_profile = \"helper\"")
        try harness.restartDaemon()
        try start(.bash, window: "tools")
        try tmux.type("tools", #"list the files [[tool:echo {"city":"Paris"}]]"#)
        let inserted = try bufferAfter("tools", pressing: "M-a")
        XCTAssertTrue(inserted.hasPrefix("tool results: [echo] "), "the key stopped before the chain's last turn: \(inserted)")
        XCTAssertFalse((try tmux.screen("tools")).contains("held no command"))
    }

    /// A reply whose command hides a line behind blank ones: the key leaves out the blank
    /// lines and shows every line above the prompt, so one Enter runs only what was seen; a
    /// command the screen cannot show whole is not inserted at all.
    func checkHiddenLines(_ shell: ShellKind) throws {
        try start(shell, window: "hidden")
        // 30 blank lines: as many as the 40-row window holds with the request typed on the
        // command line (fish draws its prompt again from where the request began).
        let hidden = "list it [[reply:```sh\ntouch hidden-file" + String(repeating: "\n", count: 30) + "ls -la\n```]]"
        try typeLines(shell, "hidden", hidden)
        try tmux.press("hidden", "M-a")
        try waitForScreen("hidden", "the numbered listing") { $0.contains("1  touch hidden-file") && $0.contains("2  ls -la") }
        XCTAssertEqual(try buffer("hidden"), "touch hidden-file\nls -la")
        // Every line of the buffer is on the screen as Enter is pressed.
        let screen = try tmux.screen("hidden")
        let rows = screen.split(separator: "\n").map(String.init)
        XCTAssertTrue(rows.contains { $0.hasSuffix("touch hidden-file") && !$0.contains("1  ") }, screen)
        XCTAssertTrue(rows.contains { $0.hasSuffix("ls -la") && !$0.contains("2  ") }, screen)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work + "/hidden-file"), "the key ran the command")
        try tmux.press("hidden", "Enter")
        try waitFor("the command that was seen to run") { FileManager.default.fileExists(atPath: self.work + "/hidden-file") }

        // 25 lines, taller than the 40-row window can show twice: refused, the line stays as it was.
        try tmux.press("hidden", "C-o")
        let tall = "a long one [[reply:```\n" + (["touch tall-file"] + Array(repeating: "true", count: 24)).joined(separator: "\n") + "\n```]]"
        try typeLines(shell, "hidden", tall)
        let typed = try buffer("hidden")
        try tmux.press("hidden", "M-a")
        try waitForScreen("hidden", "the refusal") { $0.contains("too long to check") }
        XCTAssertEqual(try buffer("hidden"), typed)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work + "/tall-file"))
    }

    func testBashHiddenLines() throws { try checkHiddenLines(.bash) }
    func testZshHiddenLines() throws { try checkHiddenLines(.zsh) }
    func testFishHiddenLines() throws { try checkHiddenLines(.fish) }

    func testBash() throws { try checkShell(.bash) }
    func testZsh() throws { try checkShell(.zsh) }
    func testFish() throws { try checkShell(.fish) }

    // MARK: The snippets parse

    func testSnippetsPassTheShellsSyntaxChecks() throws {
        let checks: [(String, [String])] = [("bash", ["/usr/bin/bash", "-n"]), ("zsh", ["/usr/bin/zsh", "-n"]), ("fish", ["/usr/bin/fish", "--no-execute"])]
        for (shell, checker) in checks {
            for arguments in [["shell-init", shell], ["shell-init", shell, "--key", "ctrl-x", "--explain-key", "ctrl-alt-e"], ["completions", shell]] {
                let keys = arguments
                let printed = try harness.runClient(arguments)
                XCTAssertEqual(printed.status, 0, printed.stderr)
                let process = Process()
                process.executableURL = URL(fileURLWithPath: checker[0])
                process.arguments = Array(checker.dropFirst())
                let input = Pipe(), errors = Pipe()
                process.standardInput = input
                process.standardError = errors
                process.standardOutput = FileHandle.nullDevice
                try process.run()
                input.fileHandleForWriting.write(Data(printed.stdout.utf8))
                try input.fileHandleForWriting.close()
                let complaint = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                XCTAssertEqual(process.terminationStatus, 0, "\(shell) \(keys): \(complaint)")
                XCTAssertEqual(complaint, "", "\(shell) \(keys)")
            }
        }
        // Conversation ids complete from the daemon, with titles where the shell shows them.
        let id = try harness.createConversation(try harness.client(), title: "commit messages")
        for (shell, expected) in [("fish", id + "\tcommit messages"), ("zsh", id + ":commit messages"), ("bash", id)] {
            // As the generated scripts call it: the request must be the first argument.
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Binaries.path("confab"))
            process.arguments = ["---completion", "rm", "--", "positional@0", "2", "0", "confab", "rm", ""]
            var environment = ProcessInfo.processInfo.environment
            environment["SAP_SHELL"] = shell
            environment["CONFAB_SOCKET"] = harness.socketPath
            process.environment = environment
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            let offered = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            XCTAssertEqual(offered.split(separator: "\n").map(String.init).filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }, [expected], shell)
        }
        // A key the terminal needs is refused.
        let refused = try harness.runClient(["shell-init", "bash", "--key", "ctrl-c"])
        XCTAssertEqual(refused.status, 2)
        XCTAssertTrue(refused.stderr.contains("ctrl-c is taken"), refused.stderr)
    }
}
