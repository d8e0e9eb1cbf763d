import XCTest

@testable import Posix
#if canImport(Glibc)
import Glibc
#endif

final class ConfabPathsTests: XCTestCase {

    func testRuntimeDirectoryFromXDG() {
        let paths = ConfabPaths(environment: ["XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/home/ana"])
        XCTAssertEqual(paths.runtimeDirectory, "/run/user/1000/confab")
        XCTAssertEqual(paths.socket, "/run/user/1000/confab/confabd.sock")
    }

    func testNoRuntimeDirectoryFallsBackToTmp() {
        let paths = ConfabPaths(environment: ["HOME": "/home/ana"])
        XCTAssertEqual(paths.runtimeDirectory, "/tmp/confab-\(getuid())")
        XCTAssertEqual(paths.socket, "/tmp/confab-\(getuid())/confabd.sock")
    }

    func testRelativeOrEmptyRuntimeDirectoryIsIgnored() {
        for value in ["run/user/1000", "", "./run", "~/run"] {
            let paths = ConfabPaths(environment: ["XDG_RUNTIME_DIR": value, "HOME": "/home/ana"])
            XCTAssertEqual(paths.runtimeDirectory, "/tmp/confab-\(getuid())", value)
        }
    }

    func testConfabSocketWins() {
        let paths = ConfabPaths(environment: ["CONFAB_SOCKET": "/srv/confab.sock", "XDG_RUNTIME_DIR": "/run/user/1000"])
        XCTAssertEqual(paths.socket, "/srv/confab.sock")
        XCTAssertEqual(ConfabPaths(environment: ["CONFAB_SOCKET": "/x.sock"]).socket, "/x.sock")
    }

    func testEmptyConfabSocketIsIgnored() {
        let paths = ConfabPaths(environment: ["CONFAB_SOCKET": "", "XDG_RUNTIME_DIR": "/run/user/1000"])
        XCTAssertEqual(paths.socket, "/run/user/1000/confab/confabd.sock")
    }

    func testDataAndConfigFromXDG() {
        let paths = ConfabPaths(environment: [
            "HOME": "/home/ana", "XDG_DATA_HOME": "/data/ana", "XDG_CONFIG_HOME": "/etc/ana",
        ])
        XCTAssertEqual(paths.dataDirectory, "/data/ana/confab")
        XCTAssertEqual(paths.configFile, "/etc/ana/confab/config.toml")
    }

    func testDataAndConfigDefaultUnderHome() {
        let paths = ConfabPaths(environment: ["HOME": "/home/ana"])
        XCTAssertEqual(paths.dataDirectory, "/home/ana/.local/share/confab")
        XCTAssertEqual(paths.configFile, "/home/ana/.config/confab/config.toml")
    }

    func testRelativeXDGValuesAreIgnored() {
        let paths = ConfabPaths(environment: [
            "HOME": "/home/ana", "XDG_DATA_HOME": "data", "XDG_CONFIG_HOME": "./config",
        ])
        XCTAssertEqual(paths.dataDirectory, "/home/ana/.local/share/confab")
        XCTAssertEqual(paths.configFile, "/home/ana/.config/confab/config.toml")
        let empty = ConfabPaths(environment: ["HOME": "/home/ana", "XDG_DATA_HOME": "", "XDG_CONFIG_HOME": ""])
        XCTAssertEqual(empty.dataDirectory, "/home/ana/.local/share/confab")
        XCTAssertEqual(empty.configFile, "/home/ana/.config/confab/config.toml")
    }

    func testWithoutHomeTheAccountsHomeIsUsed() {
        let paths = ConfabPaths(environment: [:])
        XCTAssertTrue(paths.dataDirectory.hasPrefix("/"), paths.dataDirectory)
        XCTAssertTrue(paths.dataDirectory.hasSuffix("/.local/share/confab"), paths.dataDirectory)
        if let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir {
            XCTAssertEqual(paths.dataDirectory, String(cString: dir) + "/.local/share/confab")
        }
    }
}
