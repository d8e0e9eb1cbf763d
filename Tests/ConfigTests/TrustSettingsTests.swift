import Config
import XCTest

/// The settings that keep one party from costing or learning more than it should.
final class TrustSettingsTests: XCTestCase {
    func testEveryConfiguredSecretIsRedacted() throws {
        let settings = try load("""
            [upstream]
            base_url = "http://127.0.0.1:8080/v1"
            api_key = "sk-upstream-0001"

            [providers.other]
            base_url = "http://127.0.0.1:8081/v1"
            api_key_env = "OTHER_KEY"
            model = "m"

            [tools.echo]
            description = "echo"
            [tools.echo.request]
            url = "http://127.0.0.1:8082/echo"
            headers = { "X-Plain" = "plain-visible-value" }
            header_env = { "X-Key" = "TOOL_KEY" }
            """, environment: ["OTHER_KEY": "sk-other/0002", "TOOL_KEY": #"tok"en-0003"#])
        let secrets = settings.secrets
        XCTAssertEqual(secrets.redacting("a sk-upstream-0001 b"), "a [secret] b")
        XCTAssertEqual(secrets.redacting(#"{"k":"sk-other\/0002"}"#), #"{"k":"[secret]"}"#)
        XCTAssertEqual(secrets.redacting("q=tok%22en-0003"), "q=[secret]")
        // A header written in the config is not a secret.
        XCTAssertEqual(secrets.redacting("plain-visible-value"), "plain-visible-value")
        XCTAssertTrue(try load("").secrets.isEmpty)
    }

    func testProviderHeadersAndInlineCredentialHeadersAreSecrets() throws {
        let settings = try load("""
            [providers.azure]
            base_url = "http://127.0.0.1:8080/v1"
            model = "m"
            headers = { "api-key" = "azure-key-0004" }

            [providers.other]
            base_url = "http://127.0.0.1:8081/v1"
            model = "m"
            headers = { "Authorization" = "Bearer bearer-tok-0005" }

            [tools.echo]
            description = "echo"
            [tools.echo.request]
            url = "http://127.0.0.1:8082/echo"
            headers = { "Authorization" = "Bearer inline-tok-0006", "X-Api-Key" = "inline-key-0007", "X-Team" = "research-team" }
            """)
        let secrets = settings.secrets
        XCTAssertEqual(secrets.redacting(#"{"error":{"message":"Invalid key azure-key-0004"}}"#), #"{"error":{"message":"Invalid key [secret]"}}"#)
        XCTAssertEqual(secrets.redacting("token bearer-tok-0005 refused"), "token [secret] refused")
        XCTAssertEqual(secrets.redacting("got Bearer inline-tok-0006"), "got [secret]")
        XCTAssertEqual(secrets.redacting("token inline-tok-0006"), "token [secret]")
        XCTAssertEqual(secrets.redacting("X-Api-Key: inline-key-0007"), "X-Api-Key: [secret]")
        // A tool header whose name is no credential's stays visible, as written.
        XCTAssertEqual(secrets.redacting("X-Team: research-team"), "X-Team: research-team")
        let tool = try XCTUnwrap(settings.tools.sorted.first)
        XCTAssertEqual(tool.headers.map(\.description), ["Authorization: (secret)", "X-Api-Key: (secret)", "X-Team: research-team"])
    }

    func testUnansweredRequestsPerClientIsALimit() throws {
        XCTAssertEqual(try load("").limits.maxUnansweredPerClient, 64)
        XCTAssertEqual(try load("[limits]\nmax_unanswered_requests = 8\n").limits.maxUnansweredPerClient, 8)
        assertRejected("[limits]\nmax_unanswered_requests = 0\n", "config.toml: line 2: limits.max_unanswered_requests must be positive")
    }
}
