import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `[access] allow_uids`, with connections made for real by another user: the test runs the
/// clients under setpriv(1), so it needs root. The daemon makes its socket 0600 in a 0700
/// directory; each test opens both up after the daemon starts, so that only the uid check
/// in `Broker.accept` stands between the other user and the daemon.
final class AccessTests: XCTestCase {
    /// `nobody` on Debian: an account that owns nothing here.
    static let otherUID: UInt32 = 65534
    static let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) }
    /// The system's python, which any user can run (a per-user install under /root is not).
    static let python = ["/usr/bin/python3", "/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// The client talks to another user's daemon only when told whose it is.
    static let sharedDaemon = ["CONFAB_DAEMON_USER": String(getuid())]

    var harness: Harness!

    override func setUpWithError() throws {
        guard getuid() == 0 else { throw XCTSkip("connecting as another uid needs root") }
        guard Self.setpriv != nil else { throw XCTSkip("setpriv (util-linux) is not installed") }
        guard Self.python != nil else { throw XCTSkip("no system python3 for the raw client") }
        // The build directory may sit where another user cannot reach it (under /root, say):
        // the client is copied to a directory of its own that everybody may read and run.
        let probe = try runAs(Self.otherUID, Self.client, ["--help"])
        XCTAssertEqual(probe.status, 0, "uid \(Self.otherUID) cannot run \(Self.client): \(probe.stderr)")
        if probe.status != 0 { throw HarnessError(description: "uid \(Self.otherUID) cannot run the client") }
    }

    override func tearDown() { harness?.tearDown() }

    /// `confab`, copied once per test run into a fresh 0755 directory under /tmp (0755 too).
    static let client: String = {
        var template = Array("/tmp/confab-access-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { return Binaries.path("confab") }
        let directory = String(cString: made)
        chmod(directory, 0o755)
        let copy = directory + "/confab"
        do {
            try FileManager.default.copyItem(atPath: Binaries.path("confab"), toPath: copy)
        } catch {
            return Binaries.path("confab")
        }
        chmod(copy, 0o755)
        // Removed when the test process exits.
        atexit { if let dir = AccessTests.copiedDirectory { try? FileManager.default.removeItem(atPath: dir) } }
        copiedDirectory = directory
        return copy
    }()
    nonisolated(unsafe) static var copiedDirectory: String?

    func testAnotherUserIsRefusedAndTheLogNamesTheUID() throws {
        harness = try Harness()
        openSocketToOthers()

        // The real client: the daemon closes the connection without a word.
        let status = try runAs(Self.otherUID, Self.client, ["--socket", harness.socketPath, "status"], environment: Self.sharedDaemon)
        XCTAssertEqual(status.status, 1, status.stderr)
        XCTAssertEqual(status.stdout, "")
        XCTAssertTrue(status.stderr.contains("confabd closed the connection"), status.stderr)
        waitForLog("connection refused: uid=\(Self.otherUID) pid=\(status.pid) is not allowed")

        // Byte for byte: not one frame comes back, not even an error, before the close.
        let raw = try rawHelloAndStatus(as: Self.otherUID)
        XCTAssertEqual(raw.status, 0, raw.stderr)
        XCTAssertEqual(raw.stdout, "", "a refused peer is sent nothing")
        waitForLog("connection refused: uid=\(Self.otherUID) pid=\(raw.pid) is not allowed")
        XCTAssertFalse(harness.log().contains("connected uid=\(Self.otherUID)"), harness.log())

        // The daemon's own uid is still served, and the refused peers never counted as clients.
        let own = try harness.client()
        XCTAssertEqual(try own.call("status")["clients"]?.int, 1)
    }

    func testAUIDListedInAllowUIDsIsServedAndSeenAsItselfFromThePeerCredentials() throws {
        harness = try Harness(config: "[access]\nallow_uids = [\(Self.otherUID)]\n")
        openSocketToOthers()

        let status = try runAs(Self.otherUID, Self.client, ["--socket", harness.socketPath, "status"], environment: Self.sharedDaemon)
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertTrue(status.stdout.hasPrefix("confabd ") && status.stdout.contains("clients:"), status.stdout)
        waitForLog("connected uid=\(Self.otherUID) pid=\(status.pid)")

        // hello offers a uid and a login of its own; the daemon answers with the kernel's.
        let raw = try rawHelloAndStatus(as: Self.otherUID)
        XCTAssertEqual(raw.status, 0, raw.stderr)
        let frames = try raw.stdout.split(separator: "\n").map { try JSON.parse(String($0)) }
        XCTAssertEqual(frames.count, 2, raw.stdout)
        let user = try XCTUnwrap(frames.first?["result"]?["user"], raw.stdout)
        XCTAssertEqual(user["uid"]?.int, Int(Self.otherUID))
        let login = getpwuid(Self.otherUID).map { String(cString: $0.pointee.pw_name) } ?? String(Self.otherUID)
        XCTAssertEqual(user["login"]?.string, login)
        XCTAssertEqual(user["name"]?.string, "visitor")
        XCTAssertEqual(frames.last?["id"]?.int, 2)
        XCTAssertNotNil(frames.last?["result"]?["clients"]?.int, raw.stdout)
        waitForLog("connected uid=\(Self.otherUID) pid=\(raw.pid)")

        // The list lets in exactly the uids it names.
        let stranger = try runAs(Self.otherUID - 1, Self.client, ["--socket", harness.socketPath, "status"], environment: Self.sharedDaemon)
        XCTAssertEqual(stranger.status, 1, stranger.stdout)
        waitForLog("connection refused: uid=\(Self.otherUID - 1) pid=\(stranger.pid) is not allowed")
    }

    func testTheClientRefusesADaemonOfAnotherUserAndSaysWhose() throws {
        harness = try Harness()
        openSocketToOthers()
        let refused = try runAs(Self.otherUID, Self.client, ["--socket", harness.socketPath, "ls"])
        XCTAssertEqual(refused.status, 3, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("refusing \(harness.socketPath): it is served by uid 0"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("CONFAB_DAEMON_USER"), refused.stderr)
        // Naming some other user does not let it through either.
        let wrong = try runAs(Self.otherUID, Self.client, ["--socket", harness.socketPath, "ls"],
                              environment: ["CONFAB_DAEMON_USER": "1"])
        XCTAssertEqual(wrong.status, 3, wrong.stderr)
        XCTAssertTrue(wrong.stderr.contains("nor by uid 1"), wrong.stderr)
    }

    /// Without XDG_RUNTIME_DIR the client looks in /tmp/confab-$UID, which anyone could have
    /// made first: it must be the user's own, mode 0700.
    func testTheFallbackDirectoryMustBeTheUsersOwnAndPrivate() throws {
        harness = try Harness()
        let uid: UInt32 = Self.otherUID - 2
        let directory = "/tmp/confab-\(uid)"
        var existing = stat()
        guard lstat(directory, &existing) != 0 else { throw XCTSkip("\(directory) exists already") }
        XCTAssertEqual(mkdir(directory, 0o777), 0)
        defer { rmdir(directory) }
        chmod(directory, 0o777)
        func ls() throws -> (status: Int32, stderr: String) {
            let run = try runAs(uid, Self.client, ["ls"], environment: ["HOME": "/"])
            return (run.status, run.stderr)
        }

        var run = try ls()
        XCTAssertEqual(run.status, 3)
        XCTAssertTrue(run.stderr.contains("refusing \(directory): it belongs to uid 0"), run.stderr)
        XCTAssertTrue(run.stderr.contains("not to you (uid \(uid)"), run.stderr)

        XCTAssertEqual(chown(directory, uid, uid), 0)
        run = try ls()
        XCTAssertEqual(run.status, 3)
        XCTAssertTrue(run.stderr.contains("refusing \(directory): its mode is 0777"), run.stderr)

        // Its own and private: the client looks for the socket in it (and finds none).
        XCTAssertEqual(chmod(directory, 0o700), 0)
        run = try ls()
        XCTAssertEqual(run.status, 3)
        XCTAssertTrue(run.stderr.contains("cannot reach confabd at \(directory)/confabd.sock"), run.stderr)
    }

    // MARK: - Helpers

    /// For this test only: the daemon sets 0700 on the directory and 0600 on the socket
    /// again at every start.
    private func openSocketToOthers() {
        XCTAssertEqual(chmod(harness.directory, 0o711), 0)
        XCTAssertEqual(chmod(harness.socketPath, 0o666), 0)
    }

    /// Runs `executable` as `uid` (its own group, no supplementary groups). setpriv execs it,
    /// so the PID returned is the one the daemon sees.
    private func runAs(_ uid: UInt32, _ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (pid: Int32, status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.setpriv!)
        process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", executable] + arguments
        process.environment = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"].merging(environment) { $1 }
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let pid = process.processIdentifier
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (pid, process.terminationStatus, String(decoding: stdoutData, as: UTF8.self), String(decoding: stderrData, as: UTF8.self))
    }

    /// Sends `hello` (claiming uid 0 and login root) and `status` in one write, as `uid`,
    /// and prints every byte received until both answers are in or the daemon closes.
    private func rawHelloAndStatus(as uid: UInt32) throws -> (pid: Int32, status: Int32, stdout: String, stderr: String) {
        let script = #"""
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(sys.argv[1])
        try:
            s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"access-test","name":"visitor","uid":0,"user":{"uid":0,"login":"root"}}}\n'
                      b'{"jsonrpc":"2.0","id":2,"method":"status"}\n')
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        while data.count(b"\n") < 2:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                break
            data += chunk
        sys.stdout.buffer.write(data)
        """#
        return try runAs(uid, Self.python!, ["-I", "-c", script, harness.socketPath])
    }

    /// The daemon logs before it closes, but a test should not lean on that ordering.
    private func waitForLog(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            if harness.log().contains(text) { return }
            usleep(20_000)
        }
        XCTFail("no log line with \"\(text)\":\n\(harness.log())", file: file, line: line)
    }
}
