import Posix
@testable import WebGateway
import XCTest

/// The page's script and stylesheet are the files in the tree, served as they are; the shells
/// load them and nothing else runs (no inline script or style).
final class PagesTests: XCTestCase {
    private func source(_ name: String) throws -> [UInt8] {
        let here = #filePath
        let root = here[..<here.range(of: "/Tests/WebGatewayTests/")!.lowerBound]
        return try Files.readAll(path: String(root) + "/Sources/WebGateway/page/" + name)
    }

    func testTheServedScriptAndStylesheetAreTheFilesInTheTree() throws {
        XCTAssertEqual(Pages.script, try source("app.js"))
        XCTAssertEqual(Pages.stylesheet, try source("app.css"))
        XCTAssertTrue(String(decoding: Pages.script, as: UTF8.self).hasPrefix("\"use strict\";"))
    }

    func testTheShellsLoadOneScriptAndOneStylesheetAndRunNothingInline() {
        for html in [Pages.list, Pages.conversation(id: "abcdefghijkl"), Pages.unauthorized, Pages.unavailable] {
            let scripts = html.components(separatedBy: "<script").count - 1
            XCTAssertLessThanOrEqual(scripts, 1, html)
            if scripts == 1 { XCTAssertTrue(html.contains("<script src=\"/app.js\" defer></script>"), html) }
            XCTAssertFalse(html.contains("<style"), html)
            XCTAssertFalse(html.contains(" style="), html)
            XCTAssertFalse(html.contains(" on"), html)
        }
        XCTAssertEqual(Pages.contentSecurityPolicy, "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
    }
}
