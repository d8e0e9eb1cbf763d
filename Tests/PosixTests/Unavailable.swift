import Foundation
import XCTest

/// What a test throws when this machine lacks something it needs (root, a tool, the MCP
/// environment): a skip on a developer's machine, where a partial run is fine and says so at its
/// end (scripts/run-xctest.sh), but a failure under CI (`CI=true`, as `.ci/run` runs), where
/// everything the suite needs is required and a skip must never pass for a pass.
func unavailable(_ reason: String, file: StaticString = #filePath, line: UInt = #line) -> XCTSkip {
    if ProcessInfo.processInfo.environment["CI"] == "true" {
        XCTFail("required under CI=true, and missing: \(reason)", file: file, line: line)
    }
    return XCTSkip(reason)
}
