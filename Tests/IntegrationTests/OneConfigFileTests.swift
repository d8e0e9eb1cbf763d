import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// One config file serves confabd and confab-web, as the README says: confabd reads and checks
/// `[web]` (found: it refused the table, `config.toml: unknown keys: web`, at start and on
/// SIGHUP), and confab-web serves where that same table says.
final class OneConfigFileTests: XCTestCase {
    var harness: Harness!
    var gateway: Child?

    override func tearDown() {
        gateway?.stop()
        harness?.tearDown()
    }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = bind(fd, $0, length) }
        }
        withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The status line of `GET /` on the port, or nil while nothing listens there.
    static func statusLine(port: Int) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        let request = Array("GET /api/access HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
        guard send(fd, request, request.count, 0) == request.count else { return nil }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !received.contains(0x0A) {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { break }
            received += chunk[0..<n]
        }
        return String(decoding: received, as: UTF8.self).split(separator: "\r\n").first.map(String.init)
    }

    func testConfabdAndTheGatewayStartFromOneFileHoldingWeb() throws {
        let port = Self.freePort()
        harness = try Harness(config: """

            [web]
            listen = "127.0.0.1:\(port)"
            share_expires = "2h"
            share_read_only = true
            """)
        XCTAssertNotNil(try harness.client().call("status")["clients"], "confabd runs with [web] in its config")
        XCTAssertFalse(harness.log().contains("unknown keys"), harness.log())

        gateway = try Child(Binaries.path("confab-web"), ["serve", "--config", harness.configPath, "--socket", harness.socketPath,
                                                          "--state-dir", harness.directory + "/web"],
                            logFile: harness.directory + "/confab-web.log")
        var line: String?
        let deadline = Date().addingTimeInterval(30)
        while line == nil, Date() < deadline, gateway?.process.isRunning == true {
            line = Self.statusLine(port: port)
            if line == nil { usleep(50_000) }
        }
        let log = (try? String(contentsOfFile: harness.directory + "/confab-web.log", encoding: .utf8)) ?? ""
        // The page shells need no token (they hold no secret); what a token gives does.
        XCTAssertEqual(line, "HTTP/1.1 401 Unauthorized", "confab-web listens where [web] says: \(log)")
    }

    /// An address another program listens on: confab-web says which address and what to do,
    /// not NIO's "bind(descriptor:ptr:bytes:): Address already in use (errno: 98)".
    func testAnAddressInUseIsNamedWithWhatToDo() throws {
        harness = try Harness()
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 1) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        XCTAssertTrue(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let log = harness.directory + "/confab-web.log"
        gateway = try Child(Binaries.path("confab-web"), ["serve", "--config", harness.configPath, "--socket", harness.socketPath,
                                                          "--state-dir", harness.directory + "/web", "--listen", "127.0.0.1:\(port)"],
                            logFile: log)
        let status = gateway?.wait(seconds: 30)
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        XCTAssertEqual(status, 1, text)
        XCTAssertTrue(text.contains("cannot listen on 127.0.0.1:\(port): the address is in use"), text)
        XCTAssertTrue(text.contains("--listen HOST:PORT or [web] listen"), text)
        XCTAssertFalse(text.contains("errno"), text)
    }

    func testAReloadThatAddsWebIsTakenAndABadWebKeyIsRefusedByBoth() throws {
        harness = try Harness()
        try harness.writeConfig("\n[web]\nlisten = \"127.0.0.1:18411\"\nshare_expires = \"7d\"\n")
        harness.daemon?.signal(SIGHUP)
        try waitForLog("config reloaded")
        XCTAssertFalse(harness.log().contains("config reload rejected"), harness.log())

        // A typo in [web] is refused by confabd, as a typo anywhere else is, naming the key.
        try harness.writeConfig("\n[web]\nlisten = \"127.0.0.1:18411\"\nshare_expire = \"7d\"\n")
        harness.daemon?.signal(SIGHUP)
        try waitForLog("config reload rejected")
        XCTAssertTrue(harness.log().contains("web.share_expire"), harness.log())
        let gatewayRun = try OtherProcess.run(Binaries.path("confab-web"), ["url", "--config", harness.configPath,
                                                                            "--state-dir", harness.directory + "/web"])
        XCTAssertNotEqual(gatewayRun.status, 0)
        XCTAssertTrue(gatewayRun.stderr.contains("web.share_expire"), gatewayRun.stderr)

        harness.stopDaemon()
        XCTAssertThrowsError(try harness.startDaemon()) { error in
            XCTAssertTrue("\(error)".contains("web.share_expire"), "\(error)")
        }
    }

    private func waitForLog(_ text: String) throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if harness.log().contains(text) { return }
            usleep(20_000)
        }
        XCTFail("no log line with \"\(text)\":\n\(harness.log())")
    }
}

/// Runs a program to its end and returns what it said.
enum OtherProcess {
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }
}
