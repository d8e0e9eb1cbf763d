import ConfabProtocol
import XCTest

/// `tools.list`'s and `mcp.restart`'s results as both ends read and write them.
final class ToolsListingTests: XCTestCase {
    func testAListingSurvivesTheWireAndSaysOnlyWhatIsSet() throws {
        let listing = ToolsListResult(
            tools: [ListedTool(name: "weather", source: .http, description: "Weather", approval: .never),
                    ListedTool(name: "git__git_log", source: .mcp, server: "git", tool: "git_log", description: "", approval: .always, isListed: false)],
            servers: [ListedServer(name: "git", transport: .stdio, state: .stopped, tools: 1),
                      ListedServer(name: "time", transport: .stdio, state: .failed, error: "it exited", pid: 42, tools: 0)])
        let text = listing.json.text
        XCTAssertEqual(ToolsListResult(json: try JSON.parse(Array(text.utf8))), listing)
        let http = try XCTUnwrap(listing.json["tools"]?.array?.first?.object)
        XCTAssertEqual(Set(http.keys), ["name", "source", "description", "approval"], "no server, tool or listed for an HTTP tool")
        XCTAssertEqual(listing.json["tools"]?.array?.last?["listed"], .bool(false))
        XCTAssertNil(listing.json["servers"]?.array?.first?["pid"])
        XCTAssertEqual(MCPRestartResult(json: MCPRestartResult(server: listing.servers[1]).json).server, listing.servers[1])
    }

    func testEntriesThatAreNotUnderstoodAreLeftOut() throws {
        let json = try JSON.parse(Array(#"""
            {"tools":[{"name":"a","source":"carrier-pigeon"},{"source":"http"},{"name":"b","source":"http","approval":"sometimes"}],
             "servers":[{"name":"x","state":"dreaming"},{"name":"y","state":"ready","transport":"smoke","tools":"many"}]}
            """#.utf8))
        let listing = ToolsListResult(json: json)
        XCTAssertEqual(listing.tools.map(\.name), ["b"])
        XCTAssertEqual(listing.tools.first?.approval, .always, "an approval not understood is taken as the careful one")
        XCTAssertEqual(listing.servers, [ListedServer(name: "y", transport: .stdio, state: .ready, tools: 0)])
        XCTAssertNil(MCPRestartResult(json: ["server": .null]).server)
    }
}
