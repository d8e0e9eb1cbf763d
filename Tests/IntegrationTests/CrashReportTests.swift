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

    func testTheDaemonRunsWithRegisterDumpsOffUnderItsOwnName() throws {
        harness = try Harness()
        harness.stopDaemon()
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "SWIFT_BACKTRACE")
        try harness.startDaemon(environment: environment)
        let daemon = try XCTUnwrap(harness.daemon)
        XCTAssertTrue(try self.environment(of: daemon.pid).contains("SWIFT_BACKTRACE=registers=none"))
        let name = try String(contentsOfFile: "/proc/\(daemon.pid)/comm", encoding: .utf8)
        XCTAssertEqual(name, "confabd\n", "the restart keeps the process's name and PID")
        XCTAssertEqual(try harness.client().call("status")["server"]?.string, "confabd")
    }

    func testAUsersOwnRegisterSettingIsKept() throws {
        harness = try Harness()
        harness.stopDaemon()
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=yes,registers=all"
        try harness.startDaemon(environment: environment)
        let daemon = try XCTUnwrap(harness.daemon)
        XCTAssertTrue(try self.environment(of: daemon.pid).contains("SWIFT_BACKTRACE=enable=yes,registers=all"))
    }

    func testOtherSettingsAreKeptWithRegisterDumpsAddedOff() throws {
        harness = try Harness()
        harness.stopDaemon()
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=yes,preset=full"
        try harness.startDaemon(environment: environment)
        let daemon = try XCTUnwrap(harness.daemon)
        XCTAssertTrue(try self.environment(of: daemon.pid).contains("SWIFT_BACKTRACE=enable=yes,preset=full,registers=none"))
    }
}
