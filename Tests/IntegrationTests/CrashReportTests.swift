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

    func testAUsersOwnRegisterSettingIsKept() throws {
        XCTAssertEqual(try start(backtrace: "enable=yes,registers=all").setting, "enable=yes,registers=all")
    }

    func testOtherSettingsAreKeptWithRegisterDumpsAddedOff() throws {
        XCTAssertEqual(try start(backtrace: "enable=yes,preset=full").setting, "enable=yes,preset=full,registers=none")
    }
}
