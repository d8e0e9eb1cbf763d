import ConfabProtocol
import Foundation
import XCTest

/// The gateway's connections, share links' among them, are a class of their own (checked at
/// `hello`): a quarter of `max_clients` in all, an eighth per link, and never the owner's last
/// eighth. Found: 300 WebSockets on a read-only link took all 256 slots and `confab status`
/// answered "too many clients". Here `max_clients = 16`: 4 for the gateway, 2 per link.
final class ConnectionClassTests: XCTestCase {
    var harness: Harness!
    var held: [RPCClient] = []

    override func setUpWithError() throws {
        harness = try Harness(config: "[limits]\nmax_clients = 16\n")
    }

    override func tearDown() {
        for client in held { client.close() }
        harness?.tearDown()
    }

    /// Opens a connection saying `hello`; true when it was taken, false when refused at `hello`
    /// (after which the daemon hangs up: read to the end, so its slot is free again).
    private func open(_ hello: JSON) throws -> Bool {
        let client = try RPCClient(path: harness.socketPath)
        let answer = try client.request("hello", hello)
        if answer["error"] != nil {
            XCTAssertEqual(answer["error"]?["code"]?.int, RPCError.limitReached, answer.text)
            while try client.readFrame() != nil {}
            client.close()
            return false
        }
        held.append(client)
        return true
    }

    func testTheGatewaysClassNeverTakesTheOwnersSlots() throws {
        let gateway: JSON = ["client": "confab-web", "name": "web:browser", "gateway": true]
        var taken = 0
        for _ in 0..<16 where try open(gateway) { taken += 1 }
        XCTAssertEqual(taken, 4, "a quarter of max_clients for the gateway")
        XCTAssertTrue(harness.log().contains("too many gateway connections (limit 4)"), harness.log())

        let status = try harness.runClient(["status"])
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertFalse(status.stderr.contains("too many clients"), status.stderr)

        // The owner's own connections still fill what is left.
        for _ in 0..<11 { held.append(try harness.client()) }
        let last = try harness.runClient(["status"])
        XCTAssertEqual(last.status, 0, last.stderr)
    }

    func testOneLinkHoldsAnEighthAndItsPagesCountInTheGatewaysClass() throws {
        let owner = try harness.client()
        let id = try harness.createConversation(owner)
        func link(_ name: String) -> JSON {
            ["client": "confab-web", "name": .string("web:share-" + name), "gateway": true,
             "link": ["id": .string(name), "conversation": .string(id), "role": "read"]]
        }
        var taken = 0
        for _ in 0..<10 where try open(link("flood")) { taken += 1 }
        XCTAssertEqual(taken, 2, "an eighth of max_clients per link")
        XCTAssertTrue(harness.log().contains("too many connections of share link flood (limit 2 per link)"), harness.log())
        // Other links get the rest of the class, and no more.
        XCTAssertTrue(try open(link("second")))
        XCTAssertTrue(try open(link("third")))
        XCTAssertFalse(try open(link("fourth")))
        XCTAssertFalse(try open(["gateway": true]))
        let status = try harness.runClient(["status"])
        XCTAssertEqual(status.status, 0, status.stderr)
    }
}
