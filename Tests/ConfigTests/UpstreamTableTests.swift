import XCTest

import Config
import DaemonSettings

/// `[upstream]` is read by the provider reader: each check a `[providers.NAME]` key gets, with
/// its message and line, holds for the same key of `[upstream]`. Each of these loaded before.
final class UpstreamTableTests: XCTestCase {
    func testTheModelIsChecked() {
        assertRejected("[upstream]\nmodel = \"gpt 4o\"\n", "config.toml: line 2: upstream.model must be 1 to 200 characters without spaces")
        assertRejected("[upstream]\nmodel = \"\"\n", "config.toml: line 2: upstream.model must be 1 to 200 characters without spaces")
        assertRejected("[providers.p]\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"gpt 4o\"\n",
                       "config.toml: line 3: providers.p.model must be 1 to 200 characters without spaces")
    }

    func testTheBaseURLIsChecked() {
        assertRejected("[upstream]\n\nbase_url = \"http://127.0.0.1:1/v1 x\"\n", "config.toml: line 3: upstream.base_url must start with http:// or https://")
        assertRejected("[upstream]\nbase_url = \"\"\n", "config.toml: line 2: upstream.base_url must start with http:// or https://")
        assertRejected("[upstream]\nbase_url = \"http://127.0.0.1:1/v1\\r\\nX-Injected: 1\"\n",
                       "config.toml: line 2: upstream.base_url must start with http:// or https://")
        assertRejected("", "OPENAI_BASE_URL (for [upstream]) must start with http:// or https://",
                       environment: ["OPENAI_BASE_URL": "127.0.0.1:1/v1"])
    }

    func testErrorsNameTheirLine() {
        assertRejected("[upstream]\nmodel = \"m\"\nconnect_timeout_seconds = 0\n",
                       "config.toml: line 3: upstream.connect_timeout_seconds must be positive")
        assertRejected("[upstream]\nmodel = \"m\"\n\n\nmax_retries = -1\n", "config.toml: line 5: upstream.max_retries must be between 0 and 10")
    }

    func testTheKeyIsChecked() {
        assertRejected("[upstream]\napi_key = \"sk-1\\nX-Injected: 1\"\n",
                       "config.toml: line 2: upstream.api_key holds a key with line breaks or control characters")
        assertRejected("[upstream]\napi_key = \"sk-1\"\napi_key_file = \"/nonexistent\"\n",
                       "config.toml: line 3: upstream.api_key_file cannot be given with api_key: the key comes from one place")
        assertRejected("", "OPENAI_API_KEY (for [upstream]) holds a key with line breaks or control characters",
                       environment: ["OPENAI_API_KEY": "sk-1\r\nX-Injected: 1"])
    }

    func testWhatLoadedStillLoads() throws {
        let settings = try load("[upstream]\nmodel = \"m\"\ntemperature = 0.5\nvision = false\n", environment: ["OPENAI_API_KEY": "sk-env"])
        XCTAssertEqual(settings.upstream.model, "m")
        XCTAssertEqual(settings.upstream.temperature, 0.5)
        XCTAssertFalse(settings.upstream.takesImages)
        XCTAssertEqual(settings.upstream.apiKey, "sk-env")
        XCTAssertEqual(settings.upstream.maxRetries, 2)
        XCTAssertEqual(try load("").upstream.model, "gpt-4o-mini", "OpenAI's defaults when the file has no [upstream]")
        // Keys of [providers.NAME] that [upstream] never had are still unknown there.
        assertRejected("[upstream]\napi = \"anthropic\"\n", "config.toml: unknown keys: upstream.api (line 2)")
    }
}
