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
    /// A uid no account has: it owns nothing here, and its login is its number. (Not
    /// `nobody`, 65534: that is the overflow uid, which `allow_uids` refuses.)
    static let otherUID: UInt32 = 4242
    static var python: String? { OtherUser.python }

    /// The client talks to another user's daemon only when told whose it is.
    static let sharedDaemon = ["CONFAB_DAEMON_USER": String(getuid())]

    var harness: Harness!

    override func setUpWithError() throws {
        try OtherUser.requireRoot()
        let probe = try runAs(Self.otherUID, Self.client, ["--help"])
        XCTAssertEqual(probe.status, 0, "uid \(Self.otherUID) cannot run \(Self.client): \(probe.stderr)")
    }

    override func tearDown() { harness?.tearDown() }

    /// The client, copied where any uid can run it (the build directory may be private).
    static var client: String { OtherUser.client }

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
        guard lstat(directory, &existing) != 0 else { throw unavailable("\(directory) exists already") }
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

    private func openSocketToOthers() { OtherUser.openSocket(harness) }

    private func runAs(_ uid: UInt32, _ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (pid: Int32, status: Int32, stdout: String, stderr: String) {
        try OtherUser.run(uid, executable, arguments, environment: environment)
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
