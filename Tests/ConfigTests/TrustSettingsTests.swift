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

    func testUnansweredRequestsPerClientIsALimit() throws {
        XCTAssertEqual(try load("").limits.maxUnansweredPerClient, 64)
        XCTAssertEqual(try load("[limits]\nmax_unanswered_requests = 8\n").limits.maxUnansweredPerClient, 8)
        assertRejected("[limits]\nmax_unanswered_requests = 0\n", "limits.max_unanswered_requests must be positive")
    }
}
