import Config
import DaemonSettings
import XCTest

/// How the config tests read a file's text, and check that one is refused with a given error.
extension XCTestCase {
    func load(_ text: String, environment: [String: String] = [:]) throws -> Settings {
        try Settings.load(text: text, path: "config.toml", environment: environment)
    }

    func assertRejected(_ text: String, _ expected: String, environment: [String: String] = [:],
                        file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try load(text, environment: environment), file: file, line: line) { error in
            XCTAssertEqual((error as? ConfigError)?.description, expected, file: file, line: line)
        }
    }
}
