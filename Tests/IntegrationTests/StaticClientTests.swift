import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The client as a user the passwd file does not list (LDAP, SSSD, systemd-homed): glibc's
/// user lookups would load NSS modules, which the static release client cannot do (it died
/// with SIGSEGV in libnss_systemd). Run with setpriv as a uid without an entry, so root only.
/// The debug client is always checked, with every user or group lookup made to abort it
/// (`Tests/Fixtures/no-user-lookups`, preloaded: it is dynamic and would not crash); the
/// release one (the static executable) as it is, when it is built.
final class StaticClientTests: XCTestCase {
    static let strangerUID: UInt32 = 4242
    static let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) }

    var harness: Harness!

    override func setUpWithError() throws {
        guard getuid() == 0 else { throw unavailable("running as another uid needs root") }
        guard Self.setpriv != nil else { throw unavailable("setpriv (util-linux) is not installed") }
        guard getpwuid(Self.strangerUID) == nil else { throw unavailable("uid \(Self.strangerUID) has a passwd entry here") }
    }

    override func tearDown() { harness?.tearDown() }

    override class func tearDown() {
        if let shim = try? noUserLookups.get() { unlink(shim) }
    }

    /// The shim that aborts on any user or group lookup, compiled once for the class.
    static let noUserLookups: Result<String, HarnessError> = {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()  // Tests/IntegrationTests
        let source = here.deletingLastPathComponent().appendingPathComponent("Fixtures/no-user-lookups/shim.c").path
        let output = "/tmp/confab-no-user-lookups-\(getpid()).so"
        for compiler in ["/usr/bin/cc", "/usr/bin/clang", "/usr/bin/gcc"] where FileManager.default.isExecutableFile(atPath: compiler) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: compiler)
            process.arguments = ["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", output, source]
            guard (try? process.run()) != nil else { continue }
            process.waitUntilExit()
            // Readable by the stranger the client runs as.
            if process.terminationStatus == 0, chmod(output, 0o755) == 0 { return .success(output) }
            return .failure(HarnessError(description: "\(compiler) could not build \(source)"))
        }
        return .failure(HarnessError(description: "no C compiler (cc) to build the no-user-lookups shim"))
    }()

    /// The debug client with the shim preloaded, and the release client beside it in
    /// `.build/release` as it is, when it exists. Each is a command to run after setpriv:
    /// the shim is given by env to the client alone (setpriv itself looks its uid up).
    func clients() throws -> [[String]] {
        let shim: String
        do { shim = try Self.noUserLookups.get() } catch { throw unavailable(error.description) }
        let release = ((Binaries.directory as NSString).deletingLastPathComponent as NSString).appendingPathComponent("release/confab")
        return [["/usr/bin/env", "LD_PRELOAD=" + shim, Binaries.path("confab")]]
            + (FileManager.default.isExecutableFile(atPath: release) ? [[release]] : [])
    }

    func testAUserWithoutAPasswdEntryCanUseEveryClient() throws {
        harness = try Harness(config: "[access]\nallow_uids = [\(Self.strangerUID)]\n")
        XCTAssertEqual(chmod(harness.directory, 0o711), 0)
        XCTAssertEqual(chmod(harness.socketPath, 0o666), 0)
        let id = try sharedConversation()
        for client in try clients() {
            let shared = ["CONFAB_DAEMON_USER": String(getuid())]
            let status = try runAsStranger(client, ["--socket", harness.socketPath, "status"], environment: shared)
            XCTAssertEqual(status.reason, .exit, "\(client) died of signal \(status.status): \(status.stderr)")
            XCTAssertEqual(status.status, 0, "\(client): \(status.stderr)")
            // ask offers a display name: $USER when set, else the uid.
            let asked = try runAsStranger(client, ["--socket", harness.socketPath, "ask", "-c", id, "[[reply:hello]]"], environment: shared)
            XCTAssertEqual(asked.reason, .exit, "\(client) died of signal \(asked.status): \(asked.stderr)")
            XCTAssertEqual(asked.status, 0, "\(client): \(asked.stderr)")
            XCTAssertEqual(asked.stdout, "hello\n")
            // Refusing a daemon of another user names both uids, ours without a login.
            let refused = try runAsStranger(client, ["--socket", harness.socketPath, "ls"])
            XCTAssertEqual(refused.reason, .exit, "\(client) died of signal \(refused.status): \(refused.stderr)")
            XCTAssertEqual(refused.status, 3, "\(client): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("not by you (uid \(Self.strangerUID))"), refused.stderr)
        }
    }

    /// Tab in attach completes file names; libedit would look `~` up in the user database.
    func testTabAfterATildeInAttachLooksUpNoUser() throws {
        harness = try Harness(config: "[access]\nallow_uids = [\(Self.strangerUID)]\n")
        XCTAssertEqual(chmod(harness.directory, 0o711), 0)
        XCTAssertEqual(chmod(harness.socketPath, 0o666), 0)
        let id = try sharedConversation()
        let tmux = ShellTmux(directory: harness.directory)
        defer { tmux.stop() }
        for (index, client) in try clients().enumerated() {
            let exitFile = harness.directory + "/attach-exit-\(index)"
            let script = "env -i PATH=/usr/bin:/bin TERM=xterm-256color LANG=C.UTF-8 CONFAB_DAEMON_USER=\(getuid()) "
                + "\(Self.setpriv!) --reuid=\(Self.strangerUID) --regid=\(Self.strangerUID) --clear-groups -- "
                + client.map { "'\($0)'" }.joined(separator: " ") + " --socket '\(harness.socketPath)' attach \(id); echo $? > '\(exitFile)'; sleep 30"
            let window = "attach\(index)"
            try tmux.open(window, ["/bin/sh", "-c", script])
            var shown = ""
            do {
                try waitFor("attach to start") {
                    shown = try tmux.screen(window)
                    return shown.contains("shared")
                }
            } catch {
                throw HarnessError(description: "\(error): \(client) shows\n\(shown)")
            }
            for word in ["~/", "~root"] {
                try tmux.type(window, word)
                try tmux.press(window, "Tab")
                try tmux.press(window, "C-u")
            }
            try tmux.press(window, "C-d")
            try waitFor("attach to end") { FileManager.default.fileExists(atPath: exitFile) }
            let status = try String(contentsOfFile: exitFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            let screen = (try? tmux.screen(window)) ?? ""
            XCTAssertEqual(status, "0", "\(client) ended with status \(status): \(screen)")
        }
    }

    /// A conversation of the daemon's user that the stranger may write in: another user sees
    /// only what is shared with it.
    private func sharedConversation() throws -> String {
        let owner = try harness.client()
        let id = try harness.createConversation(owner, title: "shared")
        _ = try owner.call("conversation.share", ["conversation": .string(id), "uid": .int(Int(Self.strangerUID)), "role": "write"])
        return id
    }

    func waitFor(_ what: String, timeout: Double = 30, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return }
            usleep(50_000)
        }
        throw HarnessError(description: "timed out waiting for \(what)")
    }

    private func runAsStranger(_ command: [String], _ arguments: [String], environment: [String: String] = [:]) throws
        -> (reason: Process.TerminationReason, status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.setpriv!)
        let uid = Self.strangerUID
        process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--"] + command + arguments
        process.environment = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"].merging(environment) { $1 }
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationReason, process.terminationStatus, String(decoding: stdoutData, as: UTF8.self), String(decoding: stderrData, as: UTF8.self))
    }
}
