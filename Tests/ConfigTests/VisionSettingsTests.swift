import XCTest

import DaemonSettings
import ConfabProtocol
import Config

final class VisionSettingsTests: XCTestCase {
    func testProvidersAndProfilesSayWhetherTheirModelsTakeImages() throws {
        let settings = try load("""
            [upstream]
            vision = false

            [providers.local]
            base_url = "http://127.0.0.1:8080/v1"

            [providers.old]
            api = "completions"
            base_url = "http://127.0.0.1:8081/v1"

            [providers.text]
            base_url = "http://127.0.0.1:8082/v1"
            vision = false

            [profiles.blind]
            provider = "local"
            vision = false

            [profiles.seeing]
            vision = true

            [profiles.plain]
            provider = "local"
            """)
        XCTAssertEqual(settings.providerTable["default"]?.takesImages, false)
        XCTAssertEqual(settings.providerTable["local"]?.takesImages, true, "a provider takes images unless it says otherwise")
        XCTAssertEqual(settings.providerTable["old"]?.takesImages, false, "a completions provider never does")
        XCTAssertEqual(settings.providerTable["text"]?.takesImages, false)
        XCTAssertEqual(settings.profileTable["blind"]?.takesImages, false)
        XCTAssertEqual(settings.profileTable["seeing"]?.takesImages, true, "a profile may say more than [upstream]")
        XCTAssertNil(settings.profileTable["plain"]?.takesImages, "a profile without the key leaves it to the provider")
    }

    func testRefusedValuesNameTheKeyAndLine() {
        assertRejected("[upstream]\nvision = \"no\"", "config.toml: line 2: upstream.vision must be true or false, not a string")
        assertRejected("[profiles.p]\n\nvision = 1", "config.toml: line 3: profiles.p.vision must be true or false, not an integer")
        assertRejected("[providers.old]\napi = \"completions\"\nbase_url = \"http://127.0.0.1:1\"\nvision = true",
                       "config.toml: line 4: providers.old.vision cannot be true: the completions API has no form for images")
        assertRejected("[providers.old]\napi = \"completions\"\nbase_url = \"http://127.0.0.1:1\"\n[profiles.p]\nprovider = \"old\"\nvision = true",
                       "config.toml: line 6: profiles.p.vision cannot be true with provider \"old\": the completions API has no form for images")
        XCTAssertNoThrow(try load("[providers.old]\napi = \"completions\"\nbase_url = \"http://127.0.0.1:1\"\nvision = false"))
    }

    func testUploadIdleSeconds() throws {
        XCTAssertEqual(try load("").limits.uploadIdleSeconds, 300)
        XCTAssertEqual(try load("[limits]\nupload_idle_seconds = 1").limits.uploadIdleSeconds, 1)
        XCTAssertEqual(try load("[limits]\nupload_idle_seconds = 86400").limits.uploadIdleSeconds, 86400)
        for value in [0, 86401] {
            assertRejected("[limits]\nupload_idle_seconds = \(value)", "config.toml: line 2: limits.upload_idle_seconds must be between 1 and 86400")
        }
    }

    /// The room for files no message named yet: the default is what README and
    /// docs/protocol.md say, each bound derives from the one key, and the range is checked.
    func testAttachmentRoomDefaultsToWhatTheDocsSay() throws {
        let limits = try load("").limits
        XCTAssertEqual(limits.attachmentRoomMiB, 64)
        XCTAssertEqual(limits.maxUploadBytesInMemory, 64 << 20)
        XCTAssertEqual(limits.maxOtherUsersUploadBytesInMemory, 32 << 20)
        XCTAssertEqual(limits.maxUnsentBlobBytes, 40 << 20)
        XCTAssertEqual(limits.maxUnsentBlobBytes, 2 * AttachmentLimits.maxMessageBytes, "two messages' worth")
        XCTAssertEqual(limits.maxOtherUserUnsentBlobBytes, 64 << 20)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        XCTAssertTrue(readme.contains("\nattachment_room_mib = 64 "), "README's example config gives the default")
        let protocolText = try String(contentsOf: root.appendingPathComponent("docs/protocol.md"), encoding: .utf8)
        for promise in ["at most 40 MiB of files a connection stored", "at most 64 MiB of such files and uploads in progress",
                        "at most 64 MiB of them across all connections and 32 MiB across other users' connections",
                        "`limits.attachment_room_mib` (default 64, 1 to 4096)"] {
            XCTAssertTrue(protocolText.contains(promise), promise)
        }

        let small = try load("[limits]\nattachment_room_mib = 1").limits
        XCTAssertEqual([small.maxUploadBytesInMemory, small.maxOtherUsersUploadBytesInMemory, small.maxUnsentBlobBytes, small.maxOtherUserUnsentBlobBytes],
                       [1 << 20, 512 << 10, 640 << 10, 1 << 20])
        XCTAssertEqual(try load("[limits]\nattachment_room_mib = 4096").limits.maxUploadBytesInMemory, 4096 << 20)
        for value in [0, -1, 4097] {
            assertRejected("[limits]\nattachment_room_mib = \(value)", "config.toml: line 2: limits.attachment_room_mib must be between 1 and 4096")
        }
    }
}
