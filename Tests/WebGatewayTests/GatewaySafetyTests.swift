import ConfabProtocol
import WebConfig
import WebGateway
import XCTest

/// What keeps the gateway to itself: the names it answers to, the Origins it lets in, links
/// to this machine marked, one-use download tickets, the bounds of its settings, its log
/// lines and the names pages show.
final class GatewaySafetyTests: XCTestCase {
    func testOnlyItsOwnNamesAsHostAndOrigin() throws {
        let settings = try WebSettings(configText: "[web]\nlisten = \"127.0.0.1:18410\"\nhosts = [\"Phone.LAN\"]\n")
        for host in ["127.0.0.1:18410", "localhost:18410", "LOCALHOST:18410", "phone.lan:18410", "[::1]:18410"] {
            XCTAssertTrue(settings.allowsHost(host), host)
        }
        // A DNS-rebound name, another port, no port where 80 is not the port, junk.
        for host in ["attacker.example:18410", "127.0.0.1:18411", "127.0.0.1", "localhost", "", "127.0.0.1:18410 ",
                     "127.0.0.1:18410@evil", "evil.localhost:18410"] {
            XCTAssertFalse(settings.allowsHost(host), host)
        }
        XCTAssertTrue(settings.allowsOrigin("http://127.0.0.1:18410"))
        XCTAssertTrue(settings.allowsOrigin("http://localhost:18410"))
        XCTAssertFalse(settings.allowsOrigin("http://127.0.0.1:18998"), "another port of the same host")
        XCTAssertFalse(settings.allowsOrigin("http://attacker.example:18410"))
        XCTAssertFalse(settings.allowsOrigin("https://127.0.0.1:18410"), "the scheme it does not serve")
        XCTAssertFalse(settings.allowsOrigin("null"))
        // On port 80 (or 443 with TLS) a browser leaves the port out.
        let plain = try WebSettings(configText: "[web]\nlisten = \"127.0.0.1:80\"\n")
        XCTAssertTrue(plain.allowsHost("127.0.0.1"))
        XCTAssertTrue(plain.allowsOrigin("http://localhost"))
        XCTAssertThrowsError(try WebSettings(configText: "[web]\nhosts = [\"evil.example:80\"]\n"))
        XCTAssertThrowsError(try WebSettings(configText: "[web]\nhosts = \"phone.lan\"\n"))
    }

    func testPageAndDownloadBoundsAreSettings() throws {
        let defaults = WebSettings()
        XCTAssertEqual([defaults.maxPages, defaults.maxPagesPerLink, defaults.ownerReservedPages], [64, 8, 8])
        XCTAssertEqual([defaults.maxDownloads, defaults.maxDownloadsPerLink], [4, 2])
        let set = try WebSettings(configText: "[web]\nmax_pages = 10\nmax_pages_per_link = 3\nowner_reserved_pages = 2\nmax_downloads = 6\nmax_downloads_per_link = 1\n")
        XCTAssertEqual([set.maxPages, set.maxPagesPerLink, set.ownerReservedPages, set.maxDownloads, set.maxDownloadsPerLink],
                       [10, 3, 2, 6, 1])
        XCTAssertThrowsError(try WebSettings(configText: "[web]\nmax_pages = 0\n"))
        XCTAssertThrowsError(try WebSettings(configText: "[web]\nmax_pages = 4\nowner_reserved_pages = 4\n"))
        XCTAssertThrowsError(try WebSettings(configText: "[web]\nmax_pages_per_link = \"16\"\n"))
    }

    func testLinksPrintTheTokenInTheFragment() {
        let settings = WebSettings()
        XCTAssertEqual(settings.ownerURL(token: "abc"), "http://127.0.0.1:8410/#token=abc")
        XCTAssertEqual(settings.shareURL(token: "def"), "http://127.0.0.1:8410/s#token=def")
    }

    func testLocalAndPrivateAddresses() {
        let local = [
            "http://127.0.0.1:18998/landing", "http://localhost/", "http://LOCALHOST.:80", "http://app.localhost/x",
            "http://[::1]:8080/", "http://127.1/", "http://2130706433/", "http://0x7f.0.0.1/", "http://0177.0.0.1/",
            "http://0.0.0.0:9000/", "http://10.1.2.3/", "http://172.16.0.1/", "http://172.31.255.255/", "http://192.168.1.1/",
            "http://169.254.169.254/latest", "http://[fc00::1]/", "http://[fd12:3456::1]/", "http://[fe80::1%25eth0]/",
            "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", "https://user:pw@127.0.0.1/", "http://127.0.0.%31/",
            "http://example.com@127.0.0.1/",
        ]
        for url in local { XCTAssertTrue(LocalAddress.isLocal(url: url), url) }
        let remote = [
            "https://example.com/", "http://172.32.0.1/", "http://172.15.255.255/", "http://192.169.0.1/", "http://8.8.8.8/",
            "http://[2001:db8::1]/", "http://[::ffff:8.8.8.8]/", "http://127.0.0.1.example.com/", "http://localhost.example/",
            "http://127.0.0.1@example.com/", "mailto:a@127.0.0.1",
        ]
        for url in remote { XCTAssertFalse(LocalAddress.isLocal(url: url), url) }
    }

    func testRepliesMarkLinksToThisMachine() {
        let html = MarkdownHTML.render("The release notes are [here](http://127.0.0.1:18998/landing) and [there](https://example.com/)")
        XCTAssertEqual(html, "<p>The release notes are <a href=\"http://127.0.0.1:18998/landing\" rel=\"noopener noreferrer nofollow\" target=\"_blank\" class=\"local-link\">here</a> <span class=\"local-mark\">[local address]</span> and <a href=\"https://example.com/\" rel=\"noopener noreferrer nofollow\" target=\"_blank\">there</a></p>\n")
        XCTAssertTrue(MarkdownHTML.render("<http://192.168.0.1/admin>").contains("local-mark"))
        XCTAssertTrue(MarkdownHTML.render("![pic](http://[::1]/p.png)").contains("local-mark"))
    }

    func testDownloadTicketsWorkOnceForAMinute() {
        let tickets = DownloadTickets(limit: 3)
        let first = tickets.mint(token: "t", conversation: "k3v9q2m8x7ad", message: "m1", index: 0, now: 1000)
        XCTAssertEqual(first.count, 64)
        XCTAssertEqual(tickets.redeem(first, now: 1059)?.message, "m1")
        XCTAssertNil(tickets.redeem(first, now: 1059), "a second use")
        let late = tickets.mint(token: "t", conversation: "k3v9q2m8x7ad", message: "m2", index: 1, now: 1000)
        XCTAssertNil(tickets.redeem(late, now: 1060), "expired")
        XCTAssertNil(tickets.redeem("", now: 1000))
        // Bounded: the oldest goes first.
        let names = (0..<4).map { tickets.mint(token: "t", conversation: "k3v9q2m8x7ad", message: "m\($0)", index: 0, now: 2000) }
        XCTAssertEqual(tickets.waiting, 3)
        XCTAssertNil(tickets.redeem(names[0], now: 2000))
        XCTAssertEqual(tickets.redeem(names[3], now: 2000)?.message, "m3")
    }

    func testPagesNameEveryoneWithTheirLogin() {
        var view = ConversationView(role: "owner")
        let impostor = ClientInfo(id: "c7", uid: 4242, login: "mallory", name: "root@pts/0", client: "confab-attach")
        let owner = ClientInfo(id: "c1", uid: 1000, login: "ana", name: "ana@pts/3", client: "confab-attach")
        let state = view.load(AttachResult(json: ["messages": [], "clients": [impostor.json, owner.json]]))
        XCTAssertEqual(state["clients"]?.array?.compactMap(\.string), ["root@pts/0 (mallory)", "ana@pts/3"])
        let sent = Message(id: "m1", conversation: "k3v9q2m8x7ad", role: .user, content: "hi", status: .complete,
                           created: Timestamp(milliseconds: 0),
                           author: Author(uid: 4242, login: "mallory", name: "root@pts/0", clientID: "c7"))
        XCTAssertEqual(view.apply(.messageCreated(sent)).first?["message"]?["author"]?.string, "root@pts/0 (mallory)")
        let joined = view.apply(.clientAttached(ClientInfo(id: "c8", uid: 4242, login: "mallory", name: "web:browser", client: "x")))
        XCTAssertEqual(joined.first?["clients"]?.array?.compactMap(\.string).last, "web:browser (mallory)")
        let list = ConversationView.listEvent([], activity: [:])
        XCTAssertEqual(list["conversations"]?.array?.count, 0)
    }
}
