import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Real other users for the access tests: processes run as another uid with setpriv(1), so
/// the daemon's `SO_PEERCRED` sees that uid. Needs root.
enum OtherUser {
    static let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) }
    /// The system's python, which any user can run (a per-user install under /root is not).
    static let python = ["/usr/bin/python3", "/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }

    nonisolated(unsafe) private(set) static var client = ""

    /// Copies `confab` (it links only system and toolchain libraries, which anyone may read)
    /// into a directory every uid may enter, once per test run.
    static func copyClient() throws {
        guard client.isEmpty else { return }
        var template = Array("/tmp/confab-access-bin-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError(description: "mkdtemp failed") }
        let directory = String(cString: made)
        chmod(directory, 0o755)
        let copy = directory + "/confab"
        try FileManager.default.copyItem(atPath: Binaries.path("confab"), toPath: copy)
        chmod(copy, 0o755)
        client = copy
        atexit {
            let path = OtherUser.client
            unlink(path)
            rmdir((path as NSString).deletingLastPathComponent)
        }
    }

    /// Skips unless the test can run processes as another uid.
    static func requireRoot() throws {
        guard getuid() == 0 else { throw unavailable("connecting as another uid needs root") }
        guard setpriv != nil else { throw unavailable("setpriv (util-linux) is not installed") }
        guard python != nil else { throw unavailable("no system python3 for the raw client") }
        try copyClient()
    }

    /// Lets other users reach the test's daemon: it sets 0700 on the directory and 0600 on
    /// the socket again at every start, so only the uid check stands between them.
    static func openSocket(_ harness: Harness) {
        XCTAssertEqual(chmod(harness.directory, 0o711), 0)
        XCTAssertEqual(chmod(harness.socketPath, 0o666), 0)
    }

    /// Runs `executable` as `uid` (its own group, no supplementary groups) to the end. setpriv
    /// execs it, so the PID returned is the one the daemon sees.
    static func run(_ uid: UInt32, _ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws
        -> (pid: Int32, status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: setpriv!)
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

    /// A connection to the daemon made by `uid`: a python relay running as that uid connects,
    /// then copies bytes between the daemon and one end of a socket pair whose other end the
    /// returned client speaks over. When the daemon hangs up, the relay exits and the client
    /// reads end of stream.
    final class Connection {
        let client: RPCClient
        let relay: Process

        init(uid: UInt32, socketPath: String) throws {
            var pair: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
                throw HarnessError(description: "socketpair failed")
            }
            let script = #"""
            import select, socket, sys
            daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            daemon.connect(sys.argv[1])
            test = socket.socket(fileno=0)
            sys.stdout.write("connected\n")
            sys.stdout.flush()
            while True:
                ready, _, _ = select.select([daemon, test], [], [])
                for side in ready:
                    try:
                        data = side.recv(65536)
                    except ConnectionResetError:
                        data = b""
                    if not data:
                        sys.exit(0)
                    (test if side is daemon else daemon).sendall(data)
            """#
            relay = Process()
            relay.executableURL = URL(fileURLWithPath: OtherUser.setpriv!)
            relay.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", OtherUser.python!, "-I", "-c", script, socketPath]
            relay.environment = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"]
            relay.currentDirectoryURL = URL(fileURLWithPath: "/")
            relay.standardInput = FileHandle(fileDescriptor: pair[1], closeOnDealloc: false)
            let started = Pipe()
            relay.standardOutput = started
            try relay.run()
            Glibc.close(pair[1])
            // Connected before anything is sent: the daemon's log and `status` see it from here on.
            let line = started.fileHandleForReading.availableData
            guard String(decoding: line, as: UTF8.self).hasPrefix("connected") else {
                Glibc.close(pair[0])
                relay.waitUntilExit()
                throw HarnessError(description: "uid \(uid) could not connect to \(socketPath)")
            }
            client = RPCClient(connected: pair[0])
        }

        /// The relay's PID: the one the daemon logs for this connection.
        var pid: Int32 { relay.processIdentifier }

        func stop() {
            client.close()
            if relay.isRunning { kill(relay.processIdentifier, SIGTERM) }
            relay.waitUntilExit()
        }
    }
}
