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

    /// ` onclick=`, ` onload=`…: an attribute that would run script.
    static func hasEventAttribute(_ html: String) -> Bool {
        let bytes = Array(html.utf8)
        var i = 0
        while i + 3 < bytes.count {
            if bytes[i] == UInt8(ascii: " "), bytes[i + 1] == UInt8(ascii: "o"), bytes[i + 2] == UInt8(ascii: "n") {
                var j = i + 3
                while j < bytes.count, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(bytes[j]) { j += 1 }
                if j > i + 3, j < bytes.count, bytes[j] == UInt8(ascii: "=") { return true }
            }
            i += 1
        }
        return false
    }

    func testTheShellsLoadOneScriptAndOneStylesheetAndRunNothingInline() {
        for html in [Pages.list, Pages.conversation(id: "abcdefghijkl"), Pages.unauthorized, Pages.unavailable] {
            let scripts = html.components(separatedBy: "<script").count - 1
            XCTAssertLessThanOrEqual(scripts, 1, html)
            if scripts == 1 { XCTAssertTrue(html.contains("<script src=\"/app.js\" defer></script>"), html) }
            XCTAssertFalse(html.contains("<style"), html)
            XCTAssertFalse(html.contains(" style="), html)
            XCTAssertFalse(Self.hasEventAttribute(html), html)
        }
        XCTAssertTrue(Self.hasEventAttribute("<p onclick=\"x()\">"), "the check finds what it looks for")
        XCTAssertTrue(Pages.unauthorized.contains("<code>confab web --url</code>"))
        XCTAssertTrue(Pages.unauthorized.contains("/app.css"))
        XCTAssertEqual(String(decoding: Pages.favicon.prefix(4), as: UTF8.self), "<svg")
        XCTAssertEqual(Pages.contentSecurityPolicy, "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
    }
}
