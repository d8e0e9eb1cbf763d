import XCTest

import Config
import DaemonSettings
import Foundation
import ServiceSettings
#if canImport(Glibc)
import Glibc
#endif

final class ProviderSettingsTests: XCTestCase {
    func testReasoningPassBackDefaultsToToolCallTurns() throws {
        let settings = try load("""
            [providers.deepseek]
            base_url = "http://127.0.0.1:1/v1"

            [providers.reasoner]
            base_url = "http://127.0.0.1:1/v1"
            reasoning_pass_back = "none"
            """, environment: [:])
        XCTAssertEqual(settings.providerTable["deepseek"]?.config.reasoningPassBack, .toolCalls)
        XCTAssertEqual(settings.providerTable["reasoner"]?.config.reasoningPassBack, ReasoningPassBack.none)
    }

    func testEveryKeyOfEveryAPI() throws {
        let settings = try load("""
            default_provider = "claude"

            [upstream]
            model = "gpt-4o-mini"

            [providers.local]
            api = "chat"
            base_url = "http://127.0.0.1:8080/v1"
            model = "llama3"
            timeout_seconds = 120
            connect_timeout_seconds = 3
            max_retries = 0
            max_tokens = 512
            headers = { "X-Team" = "blue", "X-Trace" = "on" }

            [providers.legacy]
            api = "completions"
            base_url = "https://legacy.example.test/v1"
            api_key = "sk-legacy"
            model = "davinci-002"
            user_label = "User:"
            assistant_label = "Bot:"
            stop = ["\\nUser:"]

            [providers.claude]
            api = "anthropic"
            api_key_env = "MY_CLAUDE_KEY"
            model = "claude-sonnet-4-5"
            anthropic_version = "2023-06-01"
            prompt_cache = false
            max_tokens = 2048
            """, environment: ["MY_CLAUDE_KEY": "sk-ant-env", "OPENAI_API_KEY": "sk-openai"])
        let table = settings.providerTable
        XCTAssertEqual(table.names, ["claude", "default", "legacy", "local"])
        XCTAssertEqual(table.defaultName, "claude")

        let local = try XCTUnwrap(table["local"])
        XCTAssertEqual(local.api, .chat)
        XCTAssertEqual(local.config.baseURL, "http://127.0.0.1:8080/v1")
        XCTAssertNil(local.config.apiKey, "OPENAI_API_KEY is [upstream]'s only")
        XCTAssertEqual(local.config.model, "llama3")
        XCTAssertEqual(local.config.timeoutSeconds, 120)
        XCTAssertEqual(local.config.connectTimeoutSeconds, 3)
        XCTAssertEqual(local.config.maxRetries, 0)
        XCTAssertEqual(local.config.maxTokens, 512)
        XCTAssertEqual(local.config.headers, [HTTPHeader(name: "X-Team", value: "blue"), HTTPHeader(name: "X-Trace", value: "on")])

        let legacy = try XCTUnwrap(table["legacy"])
        XCTAssertEqual(legacy.api, .completions(CompletionsOptions(userLabel: "User:", assistantLabel: "Bot:", stop: ["\nUser:"])))
        XCTAssertEqual(legacy.config.apiKey, "sk-legacy")
        XCTAssertEqual(legacy.config.maxRetries, 2)
        XCTAssertNil(legacy.config.maxTokens)

        let claude = try XCTUnwrap(table["claude"])
        XCTAssertEqual(claude.api, .anthropic(AnthropicOptions(version: "2023-06-01", promptCache: false)))
        XCTAssertEqual(claude.config.baseURL, "https://api.anthropic.com/v1")
        XCTAssertEqual(claude.config.apiKey, "sk-ant-env")
        XCTAssertEqual(claude.config.maxTokens, 2048)

        let upstream = try XCTUnwrap(table["default"])
        XCTAssertEqual(upstream.api, .chat)
        XCTAssertEqual(upstream.config.apiKey, "sk-openai")
    }

    /// The README's example, read from the README itself so the two cannot drift apart.
    func testTheREADMEProvidersExampleLoads() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        let section = try XCTUnwrap(text.components(separatedBy: "### Providers").dropFirst().first)
        let example = try XCTUnwrap(section.components(separatedBy: "```toml\n").dropFirst().first?.components(separatedBy: "```").first)
        let settings = try load(example, environment: ["CLAUDE_KEY": "sk-ant-readme", "OPENAI_API_KEY": "sk-o", "DEEPSEEK_API_KEY": "sk-d",
                                                       "OPENROUTER_API_KEY": "sk-r", "ANTHROPIC_API_KEY": "sk-a"])
        let table = settings.providerTable
        XCTAssertEqual(table.names, ["claude", "claude-thinks", "deepseek", "default", "legacy", "local", "o-chat", "openai", "router"])
        XCTAssertEqual(table["openai"]?.api, .responses)
        XCTAssertEqual(table["openai"]?.config.reasoningEffort, "medium")
        XCTAssertEqual(table["deepseek"]?.config.options.thinking, false)
        XCTAssertEqual(table["router"]?.config.options.reasoningFormat, .openrouter)
        XCTAssertEqual(table["router"]?.config.options.extraBody.map(\.key), ["provider"])
        XCTAssertEqual(table["o-chat"]?.config.options.maxTokensField, .max_completion_tokens)
        XCTAssertEqual(table["claude-thinks"]?.config.options.thinkingBudget, 4096)
        XCTAssertEqual(table.defaultName, "claude")
        XCTAssertEqual(table["claude"]?.config.apiKey, "sk-ant-readme")
        XCTAssertEqual(table["claude"]?.config.maxTokens, 4096)
        XCTAssertEqual(table["legacy"]?.api, .completions(CompletionsOptions(stop: ["\nHuman:", "\nAI:"])))
        XCTAssertEqual(table["legacy"]?.config.headers, [HTTPHeader(name: "X-Team", value: "research")])
        XCTAssertEqual(table["local"]?.config.timeoutSeconds, 300)
        let profiles = settings.profileTable
        XCTAssertEqual(profiles.sorted.map(\.name), ["ada", "coder"])
        XCTAssertEqual(profiles["coder"]?.provider, "claude")
        XCTAssertEqual(profiles["ada"]?.quickReplies.count, 3)
    }

    func testDefaults() throws {
        let settings = try load("""
            [providers.legacy]
            api = "completions"
            base_url = "http://localhost:8000/v1"
            [providers.claude]
            api = "anthropic"
            [providers.plain]
            base_url = "http://[::1]:11434/v1"
            """, environment: ["ANTHROPIC_API_KEY": "sk-ant-from-env"])
        let table = settings.providerTable
        XCTAssertEqual(table.defaultName, "default", "[upstream] stays the default")
        XCTAssertEqual(table["legacy"]?.api, .completions(CompletionsOptions(userLabel: "Human:", assistantLabel: "AI:", stop: ["Human:", "AI:"])))
        XCTAssertNil(table["legacy"]?.config.model)
        XCTAssertEqual(table["claude"]?.api, .anthropic(AnthropicOptions(version: "2023-06-01", promptCache: true)), "the prompt cache is used unless switched off")
        XCTAssertEqual(table["claude"]?.config.maxTokens, 1024)
        XCTAssertEqual(table["claude"]?.config.apiKey, "sk-ant-from-env")
        XCTAssertEqual(table["plain"]?.api, .chat, "api defaults to chat")
        XCTAssertEqual(table["plain"]?.config.timeoutSeconds, 60)
        XCTAssertEqual(table["plain"]?.config.maxRetries, 2)
    }

    func testAKeyFromAFile() throws {
        let path = "/tmp/confab-provider-key-\(getpid())"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        _ = Array("sk-ant-file\n".utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        defer { unlink(path) }
        let settings = try load("[providers.claude]\napi = \"anthropic\"\napi_key_file = \"\(path)\"\n", environment: ["ANTHROPIC_API_KEY": "sk-env"])
        XCTAssertEqual(settings.providerTable["claude"]?.config.apiKey, "sk-ant-file", "the table's key wins over ANTHROPIC_API_KEY")
        XCTAssertTrue(settings.warnings.isEmpty, "\(settings.warnings)")
    }

    func testAnEmptyKeySaysAServerTakesNone() throws {
        let settings = try load("[providers.lan]\nbase_url = \"http://192.168.1.5:8080/v1\"\napi_key = \"\"\n")
        XCTAssertEqual(settings.providerTable["lan"]?.config.apiKey, "")
    }

    func testMistakesAreErrorsNamingTheKeyAndLine() {
        assertRejected("[providers.x]\napi = \"gemini\"\n",
                       "config.toml: line 2: providers.x.api must be \"chat\", \"completions\", \"anthropic\" or \"responses\", not \"gemini\"")
        assertRejected("[providers.x]\napi = 1\n", "config.toml: line 2: providers.x.api must be a string, not an integer")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nmodle = \"m\"\n",
                       "config.toml: unknown keys: providers.x.modle (line 3; did you mean providers.x.model?)")
        assertRejected("[providers.x]\nheaders = { \"X-A\" = 1 }\n",
                       "config.toml: line 2: providers.x.headers.X-A must be a string, not an integer")
        assertRejected("[providers.x]\nheaders = \"X-A: 1\"\n",
                       "config.toml: line 2: providers.x.headers must be a table of strings, not a string")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nheaders = { \"X A\" = \"1\" }\n",
                       "config.toml: line 3: providers.x.headers.X A is not an HTTP header name")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nheaders = { \"X-A\" = \"1\\r\\nX-B: 2\" }\n",
                       "config.toml: line 3: providers.x.headers.X-A must not hold line breaks or control characters")
        assertRejected("[providers.x]\nstop = \"Human:\"\n",
                       "config.toml: line 2: providers.x.stop must be an array of strings, not a string")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nstop = [\"Human:\"]\n",
                       "config.toml: line 3: providers.x.stop is only for api = \"completions\", and this provider's api is \"chat\"")
        assertRejected("[providers.x]\napi = \"anthropic\"\napi_key = \"k\"\nuser_label = \"Q:\"\n",
                       "config.toml: line 4: providers.x.user_label is only for api = \"completions\", and this provider's api is \"anthropic\"")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nprompt_cache = true\n",
                       "config.toml: line 3: providers.x.prompt_cache is only for api = \"anthropic\", and this provider's api is \"chat\"")
        assertRejected("[providers.x]\napi = \"completions\"\nbase_url = \"http://127.0.0.1:1\"\nanthropic_version = \"2023-06-01\"\n",
                       "config.toml: line 4: providers.x.anthropic_version is only for api = \"anthropic\", and this provider's api is \"completions\"")
        assertRejected("[providers.x]\napi = \"completions\"\nbase_url = \"http://127.0.0.1:1\"\nuser_label = \"\"\n",
                       "config.toml: line 4: providers.x.user_label must be a non-empty label on one line")
        assertRejected("[providers.x]\napi = \"completions\"\nbase_url = \"http://127.0.0.1:1\"\nstop = [\"\"]\n",
                       "config.toml: line 4: providers.x.stop must not hold an empty string")
        assertRejected("[providers.x]\nbase_url = \"ftp://h\"\n", "config.toml: line 2: providers.x.base_url must start with http:// or https://")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\ntimeout_seconds = 0\n",
                       "config.toml: line 3: providers.x.timeout_seconds must be positive")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nconnect_timeout_seconds = -1\n",
                       "config.toml: line 3: providers.x.connect_timeout_seconds must be positive")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nmax_retries = 11\n",
                       "config.toml: line 3: providers.x.max_retries must be between 0 and 10")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nmax_tokens = 0\n",
                       "config.toml: line 3: providers.x.max_tokens must be positive")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"two words\"\n",
                       "config.toml: line 3: providers.x.model must be 1 to 200 characters without spaces")
        assertRejected("[providers.x]\napi = \"anthropic\"\napi_key = \"k\"\nanthropic_version = \"\"\n",
                       "config.toml: line 4: providers.x.anthropic_version must be a version such as \"2023-06-01\"")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\nreasoning_pass_back = \"always\"\n",
                       "config.toml: line 3: providers.x.reasoning_pass_back must be \"tool_calls\" or \"none\", not \"always\"")
        assertRejected("[providers.x]\napi = \"anthropic\"\napi_key = \"k\"\nreasoning_pass_back = \"none\"\n",
                       "config.toml: line 4: providers.x.reasoning_pass_back is only for api = \"chat\", and this provider's api is \"anthropic\"")
        assertRejected("providers = 3\n", "config.toml: line 1: providers must be a table, not an integer")
        assertRejected("[providers]\nx = 3\n", "config.toml: line 2: providers.x must be a table, not an integer")
    }

    func testProviderNames() {
        assertRejected("[providers.default]\nbase_url = \"http://127.0.0.1:1\"\n",
                       "config.toml: line 1: providers.default cannot be: the provider named default is [upstream]")
        assertRejected("[providers.\"a b\"]\nbase_url = \"http://127.0.0.1:1\"\n",
                       "config.toml: line 1: providers.a b is not a provider name: 1 to 64 letters, digits, - or _")
    }

    func testDefaultProviderMustExist() {
        assertRejected("default_provider = \"claude\"\n",
                       "config.toml: line 1: default_provider names no configured provider: \"claude\" (there are: default)")
        assertRejected("default_provider = 1\n", "config.toml: line 1: default_provider must be a string, not an integer")
        XCTAssertEqual(try load("default_provider = \"default\"\n").providerTable.defaultName, "default")
    }

    func testKeysThatAreMissing() {
        // An error about the whole table is at its header.
        assertRejected("[upstream]\nmodel = \"m\"\n\n[providers.claude]\napi = \"anthropic\"\n",
                       "config.toml: line 4: providers.claude needs an API key: set api_key, api_key_file or api_key_env, or ANTHROPIC_API_KEY in confabd's environment")
        assertRejected("[providers.claude]\napi = \"anthropic\"\nmodel = \"c\"\n",
                       "config.toml: line 1: providers.claude needs an API key: set api_key, api_key_file or api_key_env, or ANTHROPIC_API_KEY in confabd's environment")
        assertRejected("[providers.claude]\napi = \"anthropic\"\napi_key = \"\"\n",
                       "config.toml: line 3: providers.claude.api_key gives an empty key, and this provider needs one")
        assertRejected("[providers.remote]\nbase_url = \"https://models.example.test/v1\"\n",
                       "config.toml: line 1: providers.remote needs an API key: set api_key, api_key_file or api_key_env (api_key = \"\" for a server that takes none)",
                       environment: ["OPENAI_API_KEY": "sk-not-for-this-one"])
        assertRejected("[providers.remote]\napi = \"completions\"\n",
                       "config.toml: line 1: providers.remote needs an API key: set api_key, api_key_file or api_key_env (api_key = \"\" for a server that takes none)")
        assertRejected("[providers.remote]\nbase_url = \"https://models.example.test/v1\"\napi_key_env = \"REMOTE_KEY\"\n",
                       "config.toml: line 3: providers.remote.api_key_env names REMOTE_KEY, which is not set in confabd's environment")
        assertRejected("[providers.remote]\napi_key = \"a\"\napi_key_env = \"B\"\n",
                       "config.toml: line 3: providers.remote.api_key_env cannot be given with api_key: the key comes from one place")
        assertRejected("[providers.remote]\napi_key_file = \"/nonexistent/confab-key\"\n",
                       "config.toml: line 2: providers.remote.api_key_file cannot be used: cannot read the key file /nonexistent/confab-key: No such file or directory")
        assertRejected("[providers.remote]\napi_key = \"a\\nb\"\n",
                       "config.toml: line 2: providers.remote.api_key holds a key with line breaks or control characters")
    }

    func testLoopbackHostsNeedNoKey() throws {
        for url in ["http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:1/v1", "http://user@127.0.0.2/v1", "http://LOCALHOST"] {
            XCTAssertNoThrow(try load("[providers.x]\nbase_url = \"\(url)\"\n"), url)
        }
        for url in ["http://10.0.0.1/v1", "http://127.0.0.1.example.test/v1", "https://localhost.example.test"] {
            XCTAssertThrowsError(try load("[providers.x]\nbase_url = \"\(url)\"\n"), url)
        }
    }

    func testUpstreamKeepsItsOwnRules() throws {
        // [upstream] without a key still loads, as before: its replies fail with not_configured.
        let settings = try load("[upstream]\nbase_url = \"https://api.openai.com/v1\"\n")
        XCTAssertNil(settings.providerTable.defaultProvider.config.apiKey)
        XCTAssertEqual(settings.providerTable.defaultProvider.name, "default")
    }
}
