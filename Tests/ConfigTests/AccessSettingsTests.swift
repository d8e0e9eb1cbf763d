import Config
import DaemonSettings
import Posix
import XCTest

/// `[access] allow_uids`: real uids only, and never the overflow uid, which stands for every
/// user the daemon's user namespace cannot map (systemd's PrivateUsers=yes).
final class AccessSettingsTests: XCTestCase {
    func testTheOverflowUIDIsRefusedWithTheReason() {
        let overflow = UserAccount.overflowUID
        XCTAssertThrowsError(try load("[access]\nallow_uids = [1001, \(overflow)]\n")) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("config.toml: line 2: access.allow_uids"), text)
            XCTAssertTrue(text.contains("holds \(overflow), the overflow uid"), text)
            XCTAssertTrue(text.contains("PrivateUsers=yes"), text)
        }
    }

    func testTheOverflowUIDIsReadFromTheKernel() throws {
        let text = try String(contentsOfFile: "/proc/sys/kernel/overflowuid", encoding: .utf8)
        XCTAssertEqual(UserAccount.overflowUID, UInt32(text.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    func testANumberThatIsNoUIDIsRefused() {
        XCTAssertThrowsError(try load("[access]\nallow_uids = [-1]\n")) { error in
            XCTAssertTrue("\(error)".contains("holds -1, which is not a uid"), "\(error)")
        }
        XCTAssertThrowsError(try load("[access]\nallow_uids = [4294967295]\n"))
        XCTAssertEqual(try load("[access]\nallow_uids = [0, 1001]\n").allowedUIDs, [0, 1001])
    }
}
