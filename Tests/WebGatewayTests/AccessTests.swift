#if canImport(Glibc)
import Glibc
#endif
import Foundation
import XCTest
import WebConfig
import WebGateway

/// The owner's token, share links and the `[web]` settings.
final class AccessTests: XCTestCase {
    var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "confab-web-tests-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testOwnerTokenIsPrivateStableAndRotatable() throws {
        let store = AccessStore(directory: directory + "/web")
        let token = try store.ownerToken()
        XCTAssertEqual(token.count, 64)
        XCTAssertEqual(try store.ownerToken(), token)
        var info = stat()
        XCTAssertEqual(stat(directory + "/web/owner-token", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        XCTAssertEqual(stat(directory + "/web", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        XCTAssertEqual(store.access(for: token), .owner)
        let rotated = try store.rotateOwnerToken()
        XCTAssertNotEqual(rotated, token)
        XCTAssertNil(store.access(for: token))
        XCTAssertEqual(store.access(for: rotated), .owner)
        XCTAssertNil(store.access(for: ""))
        XCTAssertNil(store.access(for: String(rotated.dropLast()) + "x"))
    }

    func testShareLinksSeeOneConversationUntilRevokedOrExpired() throws {
        let store = AccessStore(directory: directory)
        let share = try store.createShare(conversation: "k3v9q2m8x7ad", role: .read, expiresIn: 60, now: 1000)
        guard case .share(let found)? = store.access(for: share.token, now: 1030) else { return XCTFail("share not found") }
        XCTAssertEqual(found.role, .read)
        XCTAssertTrue(WebAccess.share(found).maySee("k3v9q2m8x7ad"))
        XCTAssertFalse(WebAccess.share(found).maySee("aaaaaaaaaaaa"))
        XCTAssertFalse(WebAccess.share(found).canWrite)
        XCTAssertFalse(WebAccess.share(found).isOwner)
        XCTAssertNil(store.access(for: share.token, now: 1060), "expired")
        let other = try store.createShare(conversation: "k3v9q2m8x7ad", role: .write, expiresIn: nil, now: 1000)
        XCTAssertTrue(store.access(for: other.token, now: 1 << 40)?.canWrite ?? false)
        XCTAssertTrue(try store.revoke(other.id))
        XCTAssertNil(store.access(for: other.token))
        XCTAssertFalse(try store.revoke(other.id))
    }

    func testSettings() throws {
        XCTAssertEqual(try WebSettings(configText: "").baseURL, "http://127.0.0.1:8410")
        let settings = try WebSettings(configText: "[web]\nlisten = \"[::1]:9000\"\nshare_expires = \"2h\"\nshare_read_only = true\n")
        XCTAssertEqual(settings.baseURL, "http://[::1]:9000")
        XCTAssertEqual(settings.shareExpirySeconds, 7200)
        XCTAssertTrue(settings.shareReadOnly)
        XCTAssertNil(try settings.checkExposure())
        XCTAssertThrowsError(try WebSettings(configText: "[web]\nlisten = \"0.0.0.0:8410\"\n").checkExposure())
        XCTAssertNotNil(try WebSettings(configText: "[web]\nlisten = \"0.0.0.0:8410\"\ninsecure = true\n").checkExposure())
        XCTAssertNil(try WebSettings(configText: "[web]\nlisten = \"0.0.0.0:8410\"\ntls_cert = \"c\"\ntls_key = \"k\"\n").checkExposure())
        XCTAssertThrowsError(try WebSettings(configText: "[web]\ntls_cert = \"c\"\n"))
        XCTAssertThrowsError(try WebSettings(configText: "[web]\nlisen = \"x\"\n"))
        XCTAssertNil(WebSettings.parseDuration("2x"))
        XCTAssertEqual(WebSettings.parseDuration("30m"), 1800)
    }
}
