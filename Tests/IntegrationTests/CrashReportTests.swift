import XCTest

import ConfabProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The Swift runtime's crash report must not dump memory (where the API key may be) into
/// the journal: confabd restarts itself once with `SWIFT_BACKTRACE` saying `registers=none`.
final class CrashReportTests: XCTestCase {
    private var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    private func environment(of pid: Int32) throws -> [String] {
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: "/proc/\(pid)/environ"))
        return bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Starts the daemon with `SWIFT_BACKTRACE` set to `setting` (unset for nil); returns its
    /// PID and the value it runs with.
    private func start(backtrace setting: String?) throws -> (pid: Int32, setting: String?) {
        harness = try Harness()
        harness.stopDaemon()
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = setting
        try harness.startDaemon(environment: environment)
        let pid = try XCTUnwrap(harness.daemon).pid
        let prefix = "SWIFT_BACKTRACE="
        let value = try self.environment(of: pid).first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
        return (pid, value)
    }

    func testTheDaemonRunsWithRegisterDumpsOffUnderItsOwnName() throws {
        let daemon = try start(backtrace: nil)
        XCTAssertEqual(daemon.setting, "registers=none")
        let name = try String(contentsOfFile: "/proc/\(daemon.pid)/comm", encoding: .utf8)
        XCTAssertEqual(name, "confabd\n", "the restart keeps the process's name and PID")
        XCTAssertEqual(try harness.client().call("status")["server"]?.string, "confabd")
    }

    /// A real crash (the debug build's `CONFAB_DEBUG_CRASH_WHEN_READY`, once the config and its
    /// API key are loaded), its report read from what the daemon wrote to stderr: it says why
    /// and where (the fatal error's message, the crashed thread's frames in confabd), and holds
    /// no register dump and no part of the key.
    func testARealCrashReportsWhereWithoutRegistersOrTheKey() throws {
        let key = "sk-crash-" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        harness = try Harness(config: "api_key = \"\(key)\"\n")
        harness.stopDaemon()
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = nil
        environment["CONFAB_DEBUG_CRASH_WHEN_READY"] = "1"
        let output = harness.directory + "/crash.log"
        let daemon = try Child(Binaries.path("confabd"),
                               ["--socket", harness.socketPath, "--data-dir", harness.dataDirectory, "--config", harness.configPath],
                               environment: environment, logFile: output)
        // The crash reporter symbolicates a debug binary: a guard, not a limit on it.
        let status = daemon.wait(seconds: 300)
        XCTAssertNotNil(status, "still running")
        XCTAssertNotEqual(status, 0)
        let report = try String(contentsOfFile: output, encoding: .utf8)
        XCTAssertTrue(report.contains("ready:"), "it crashed once ready, the key loaded: \(report)")
        XCTAssertTrue(report.contains("Fatal error: crash asked for by CONFAB_DEBUG_CRASH_WHEN_READY"), report)
        XCTAssertTrue(report.contains("crashed:"), "the crashed thread is named: \(report)")
        XCTAssertTrue(report.contains(" in confabd "), "with frames in confabd: \(report)")
        XCTAssertFalse(report.contains("Registers:"), "no register dump: \(report)")
        XCTAssertNil(report.range(of: #"\b(rax|rip|rsp) 0x"#, options: .regularExpression), "no register values: \(report)")
        XCTAssertFalse(report.contains(key), "no key")
        XCTAssertFalse(report.contains(String(key.suffix(16))), "no part of the key")
    }

    func testAUsersOwnRegisterSettingIsKept() throws {
        XCTAssertEqual(try start(backtrace: "enable=yes,registers=all").setting, "enable=yes,registers=all")
    }

    func testOtherSettingsAreKeptWithRegisterDumpsAddedOff() throws {
        XCTAssertEqual(try start(backtrace: "enable=yes,preset=full").setting, "enable=yes,preset=full,registers=none")
    }
}
