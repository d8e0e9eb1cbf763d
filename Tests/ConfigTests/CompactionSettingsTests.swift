import XCTest

import DaemonSettings
import ConfabProtocol
import Config

/// A profile's `compact_model`, `compact_prompt` and `compact_at`.
final class CompactionSettingsTests: XCTestCase {
    func testTheKeysAreRead() throws {
        let settings = try load("""
            [profiles.long]
            context_tokens = 8000
            compact_at = 0.8
            compact_model = "small-model"
            compact_prompt = "Sum it up."

            [profiles.plain]
            """)
        XCTAssertEqual(settings.profileTable["long"]?.compaction, CompactionSettings(model: "small-model", prompt: "Sum it up.", at: 0.8))
        XCTAssertEqual(settings.profileTable["plain"]?.compaction, CompactionSettings())
        // The provider's budget will do.
        XCTAssertEqual(try load("[upstream]\ncontext_tokens = 4096\n[profiles.p]\ncompact_at = 0.5").profileTable["p"]?.compaction.at, 0.5)
    }

    func testRejectedValues() {
        assertRejected("[profiles.p]\ncontext_tokens = 4096\ncompact_at = 1",
                       "config.toml: line 3: profiles.p.compact_at must be a fraction of context_tokens, above 0 and below 1, not 1.0")
        assertRejected("[profiles.p]\ncontext_tokens = 4096\ncompact_at = 0",
                       "config.toml: line 3: profiles.p.compact_at must be a fraction of context_tokens, above 0 and below 1, not 0.0")
        assertRejected("[profiles.p]\ncompact_at = 0.5",
                       "config.toml: line 2: profiles.p.compact_at needs context_tokens (in the profile or its provider): it is a fraction of it")
        assertRejected("[profiles.p]\ncompact_model = \"two words\"", "config.toml: line 2: profiles.p.compact_model must be 1 to 200 characters without spaces")
        assertRejected("[profiles.p]\ncompact_prompt = \"  \"", "config.toml: line 2: profiles.p.compact_prompt must not be empty")
    }
}
