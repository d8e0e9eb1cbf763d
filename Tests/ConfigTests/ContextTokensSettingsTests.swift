import XCTest

import DaemonSettings
import ConfabProtocol
import Config

final class ContextTokensSettingsTests: XCTestCase {
    func testProfileProviderAndUpstreamKeys() throws {
        let settings = try load("""
            [upstream]
            context_tokens = 8000

            [providers.local]
            base_url = "http://127.0.0.1:8080/v1"
            max_tokens = 200
            context_tokens = 4096

            [profiles.short]
            provider = "local"
            max_tokens = 100
            context_tokens = 256

            [profiles.plain]
            """)
        XCTAssertEqual(settings.providerTable["default"]?.config.contextTokens, 8000)
        XCTAssertEqual(settings.providerTable["local"]?.config.contextTokens, 4096)
        XCTAssertEqual(settings.profileTable["short"]?.contextTokens, 256)
        XCTAssertNil(settings.profileTable["plain"]?.contextTokens, "a profile without the key leaves it to the provider")
    }

    func testRejectedValues() {
        assertRejected("[profiles.p]\ncontext_tokens = 255", "config.toml: line 2: profiles.p.context_tokens must be at least 256 tokens, not 255")
        assertRejected("[profiles.p]\ncontext_tokens = -1", "config.toml: line 2: profiles.p.context_tokens must be at least 256 tokens, not -1")
        assertRejected("[profiles.p]\n\ncontext_tokens = 4096.5", "config.toml: line 3: profiles.p.context_tokens must be an integer, not a float")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\ncontext_tokens = \"big\"",
                       "config.toml: line 3: providers.x.context_tokens must be an integer, not a string")
        assertRejected("[upstream]\ncontext_tokens = 100", "config.toml: line 2: upstream.context_tokens must be at least 256 tokens, not 100")
    }

    func testTheReplyMustFit() {
        // With no max_tokens anywhere the reply keeps ContextBudget.defaultMaxTokens.
        assertRejected("[profiles.p]\ncontext_tokens = 1024",
                       "config.toml: line 2: profiles.p.context_tokens must be more than the 1024 tokens kept for the reply (max_tokens)")
        assertRejected("[profiles.p]\nmax_tokens = 500\ncontext_tokens = 400",
                       "config.toml: line 3: profiles.p.context_tokens must be more than the 500 tokens kept for the reply (max_tokens)")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nmax_tokens = 300\ncontext_tokens = 300",
                       "config.toml: line 4: providers.x.context_tokens must be more than the 300 tokens kept for the reply (max_tokens)")
        XCTAssertNoThrow(try load("[profiles.p]\nmax_tokens = 500\ncontext_tokens = 501"))
        // [upstream] is the default provider, checked as [providers.NAME] is.
        assertRejected("[upstream]\ncontext_tokens = 300",
                       "config.toml: line 2: upstream.context_tokens must be more than the 1024 tokens kept for the reply (max_tokens)")
        assertRejected("[upstream]\nmax_tokens = 800\n\ncontext_tokens = 800",
                       "config.toml: line 4: upstream.context_tokens must be more than the 800 tokens kept for the reply (max_tokens)")
        assertRejected("[upstream]\nmax_tokens = 0", "config.toml: line 2: upstream.max_tokens must be positive")
        XCTAssertNoThrow(try load("[upstream]\nmax_tokens = 800\ncontext_tokens = 801"))
    }
}
