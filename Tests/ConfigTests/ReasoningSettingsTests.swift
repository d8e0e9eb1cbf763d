import XCTest

import ConfabProtocol
import Config
import DaemonSettings
import ServiceSettings

final class ReasoningSettingsTests: XCTestCase {
    private let environment = ["ANTHROPIC_API_KEY": "sk-ant"]

    func testEveryKeyOfAProviderAndAProfile() throws {
        let settings = try load("""
            [providers.router]
            base_url = "http://127.0.0.1:8080/v1"
            api_key = ""
            reasoning_effort = "high"
            reasoning_format = "openrouter"
            max_tokens_field = "max_completion_tokens"
            thinking = true
            extra_body = { provider = { order = ["a", "b"] }, api_key = "s3cret" }

            [providers.claude]
            api = "anthropic"
            thinking_budget = 2048
            max_tokens = 4096

            [providers.oa]
            api = "responses"
            base_url = "http://127.0.0.1:8080/v1"
            api_key = ""
            reasoning_effort = "low"

            [profiles.deep]
            provider = "router"
            reasoning_effort = "max"
            thinking = false

            [profiles.deep.extra_body]
            top_k = 20
            metadata = { user_token = "t0k" }

            [profiles.quick]
            provider = "claude"
            thinking = false
            """, environment: environment)
        let router = try XCTUnwrap(settings.providerTable["router"])
        XCTAssertEqual(router.config.reasoningEffort, "high")
        XCTAssertEqual(router.config.options.reasoningFormat, .openrouter)
        XCTAssertEqual(router.config.options.maxTokensField, .max_completion_tokens)
        XCTAssertEqual(router.config.options.thinking, true)
        XCTAssertEqual(router.config.options.extraBody, [
            ExtraBodyMember(key: "provider", value: ["order": ["a", "b"]]), ExtraBodyMember(key: "api_key", value: "s3cret"),
        ])
        XCTAssertEqual(settings.providerTable["claude"]?.config.options.thinkingBudget, 2048)
        XCTAssertEqual(settings.providerTable["oa"]?.api, .responses)
        XCTAssertEqual(settings.providerTable["oa"]?.config.reasoningEffort, "low")
        let deep = try XCTUnwrap(settings.profileTable["deep"])
        XCTAssertEqual(deep.params.reasoningEffort, "max")
        XCTAssertEqual(deep.options.thinking, false)
        XCTAssertEqual(deep.options.extraBody.map(\.key), ["top_k", "metadata"])
        XCTAssertEqual(settings.profileTable["quick"]?.options.thinking, false)
        // Credential-named values of extra_body are secrets, as a header's are.
        XCTAssertTrue(settings.secretValues.contains("s3cret"))
        XCTAssertTrue(settings.secretValues.contains("t0k"))
    }

    func testKeysConfabSetsAreRefusedInExtraBody() {
        assertRejected("""
            [providers.local]
            base_url = "http://127.0.0.1:8080/v1"
            api_key = ""

            [providers.local.extra_body]
            top_k = 20
            messages = []
            """, "config.toml: line 7: providers.local.extra_body.messages is a key confab sets itself in the chat API's requests")
        assertRejected("""
            [providers.local]
            base_url = "http://127.0.0.1:8080/v1"
            api_key = ""
            extra_body = { temperature = 1 }
            """, "config.toml: line 4: providers.local.extra_body.temperature is a key confab sets itself in the chat API's requests: set it with temperature")
        assertRejected("""
            [providers.oa]
            api = "responses"
            base_url = "http://127.0.0.1:8080/v1"
            api_key = ""

            [profiles.p]
            provider = "oa"
            extra_body = { store = true }
            """, "config.toml: line 8: profiles.p.extra_body.store is a key confab sets itself in the responses API's requests")
        assertRejected("""
            [providers.local]
            base_url = "http://127.0.0.1:8080/v1"
            api_key = ""
            extra_body = "x"
            """, "config.toml: line 4: providers.local.extra_body must be a table, not a string")
    }

    func testValuesAreChecked() {
        let local = """
            [providers.local]
            base_url = "http://127.0.0.1:8080/v1"
            api_key = ""

            """
        assertRejected(local + #"reasoning_effort = "High!""#,
                       #"config.toml: line 4: providers.local.reasoning_effort must be a level such as "low", "medium" or "high": 1 to 32 lowercase letters"#)
        assertRejected(local + #"reasoning_format = "anthropic""#,
                       #"config.toml: line 4: providers.local.reasoning_format must be "openai" (reasoning_effort) or "openrouter" (a reasoning object), not "anthropic""#)
        assertRejected(local + #"max_tokens_field = "max_output_tokens""#,
                       #"config.toml: line 4: providers.local.max_tokens_field must be "max_tokens" or "max_completion_tokens", not "max_output_tokens""#)
        assertRejected(local + "thinking_budget = 2048",
                       #"config.toml: line 4: providers.local.thinking_budget is only for api = "anthropic", and provider "local" speaks "chat""#)
        assertRejected(local + "[profiles.p]\nprovider = \"local\"\nreasoning_effort = \"x y\"",
                       #"config.toml: line 6: profiles.p.reasoning_effort must be a level such as "low", "medium" or "high": 1 to 32 lowercase letters"#)
        let claude = "[providers.claude]\napi = \"anthropic\"\n"
        assertRejected(claude + "thinking_budget = 512",
                       "config.toml: line 3: providers.claude.thinking_budget must be at least 1024 tokens (the API refuses less)", environment: environment)
        assertRejected(claude + "thinking_budget = 2048\nmax_tokens = 2048",
                       "config.toml: line 4: providers.claude.max_tokens must be more than thinking_budget (2048): the answer comes after the thinking",
                       environment: environment)
        assertRejected(claude + "thinking = true",
                       "config.toml: line 3: providers.claude.thinking = true needs thinking_budget: Anthropic thinks within a budget of tokens",
                       environment: environment)
        assertRejected(claude + "reasoning_effort = \"high\"",
                       "config.toml: line 3: providers.claude.reasoning_effort is not a parameter of the anthropic API: set thinking_budget",
                       environment: environment)
        assertRejected(claude + "[profiles.p]\nprovider = \"claude\"\nreasoning_effort = \"high\"",
                       #"config.toml: line 5: profiles.p.reasoning_effort is not a parameter of the anthropic API, which provider "claude" speaks"#,
                       environment: environment)
        assertRejected("[providers.oa]\napi = \"responses\"\nbase_url = \"http://127.0.0.1:1/v1\"\napi_key = \"\"\nthinking = false",
                       #"config.toml: line 5: providers.oa.thinking = false has no switch in the Responses API: set reasoning_effort to the least the model takes ("minimal" or "none")"#)
    }
}
