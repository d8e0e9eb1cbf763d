import XCTest

import Config
import DaemonSettings
import Foundation
import ServiceSettings

/// `[mcp.NAME]` tables of servers over Streamable HTTP: `url`, the headers, and the secrets
/// among them.
final class MCPHTTPSettingsTests: XCTestCase {
    func testAServerOverHTTPWithHeadersFromTheFileTheEnvironmentAndAFile() throws {
        let tokenFile = NSTemporaryDirectory() + "/confab-mcp-token-\(getpid())"
        try "tok-from-a-file-0123\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        chmod(tokenFile, 0o600)
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        let settings = try load("""
            [mcp.remote]
            url = "https://mcp.example.test/mcp"
            headers = { X-Client = "confab" }
            header_env = { X-Api-Key = "REMOTE_KEY" }
            bearer_token_file = "\(tokenFile)"
            approval = "never"

            [mcp.local]
            url = "http://127.0.0.1:8931/mcp"
            bearer_token_env = "LOCAL_TOKEN"
            """, environment: ["REMOTE_KEY": "key-from-the-environment", "LOCAL_TOKEN": "tok-local-98765"])
        let remote = settings.mcpServers[0]
        XCTAssertEqual(remote.http?.url, "https://mcp.example.test/mcp")
        XCTAssertEqual(remote.http?.headers.map(\.line), ["X-Client: confab", "X-Api-Key: key-from-the-environment",
                                                          "Authorization: Bearer tok-from-a-file-0123"])
        XCTAssertEqual(remote.http?.headers.map(\.isSecret), [false, true, true])
        XCTAssertEqual(remote.command, "")
        XCTAssertEqual(remote.passedEnvironment, [:], "nothing of the daemon's environment is meant for a server it does not run")
        XCTAssertEqual(settings.mcpServers[1].http?.headers.map(\.line), ["Authorization: Bearer tok-local-98765"])
        let secrets = Set(settings.secretValues)
        XCTAssertTrue(secrets.isSuperset(of: ["key-from-the-environment", "Bearer tok-from-a-file-0123", "Bearer tok-local-98765"]), "\(secrets.count)")
        XCTAssertFalse(secrets.contains("confab"))
        XCTAssertEqual(settings.secrets.redacting("echo: tok-local-98765"), "echo: [secret]")
        XCTAssertFalse("\(remote)".contains("key-from-the-environment"), "printing the settings shows no secret")
    }

    /// A server's `env` variables named as credentials, and credential-named query parameters
    /// of its `url`, are secrets: a server that echoes them has them redacted.
    func testCredentialsInEnvAndInTheURLQueryAreSecrets() throws {
        let settings = try load("""
            [mcp.github]
            command = "github-mcp"
            env = { GITHUB_PERSONAL_ACCESS_TOKEN = "ghp_0123456789abcdef", LOG_LEVEL = "verbose-logging" }

            [mcp.remote]
            url = "https://mcp.example.test/mcp?region=eu-west-1a&api_key=k%2Fquery-secret-42&access_token=plain-token-777"
            """)
        let secrets = Set(settings.secretValues)
        XCTAssertTrue(secrets.isSuperset(of: ["ghp_0123456789abcdef", "k%2Fquery-secret-42", "k/query-secret-42", "plain-token-777"]), "\(secrets.count)")
        XCTAssertFalse(secrets.contains("verbose-logging"))
        XCTAssertFalse(secrets.contains("eu-west-1a"))
        XCTAssertEqual(settings.secrets.redacting("token ghp_0123456789abcdef, key k/query-secret-42"), "token [secret], key [secret]")
    }

    /// The userinfo of a `url`, and its path segments and query values that look like tokens,
    /// are secrets too: as written and percent-decoded, and the pair as Basic authentication
    /// sends it (the redactor also finds that in base64).
    func testUserinfoAndTokensInTheURLAreSecrets() throws {
        let settings = try load("""
            [mcp.zap]
            url = "https://mcp-user:pa%24%24word-0042@mcp.example.test/api/v1/sk-ak-3f9a0c1b2d4e5f60/sse?session=550e8400-e29b-41d4-a716-446655440000&format=streamable-http&region=eu-west-1a"
            """)
        let secrets = Set(settings.secretValues)
        XCTAssertTrue(secrets.isSuperset(of: [
            "mcp-user:pa%24%24word-0042", "mcp-user:pa$$word-0042", "mcp-user", "pa%24%24word-0042", "pa$$word-0042",
            "sk-ak-3f9a0c1b2d4e5f60", "550e8400-e29b-41d4-a716-446655440000",
        ]), "\(secrets.sorted())")
        for word in ["api", "v1", "sse", "streamable-http", "eu-west-1a", "mcp.example.test", "session", "format"] {
            XCTAssertFalse(secrets.contains(word), word)
        }
        let redacted = settings.secrets.redacting(
            "user mcp-user, password pa$$word-0042, basic bWNwLXVzZXI6cGEkJHdvcmQtMDA0Mg==, path sk-ak-3f9a0c1b2d4e5f60, session 550e8400-e29b-41d4-a716-446655440000, v1")
        XCTAssertEqual(redacted, "user [secret], password [secret], basic [secret], path [secret], session [secret], v1")
        XCTAssertTrue(MCPHTTPEndpoint.looksLikeToken("ghp_0123456789abcdefABCDEF0123456789abcd"))
        XCTAssertTrue(MCPHTTPEndpoint.looksLikeToken("AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEf"), "32 characters of a token, whatever they mix")
        XCTAssertFalse(MCPHTTPEndpoint.looksLikeToken("mcp-server-v2-production"), "a word with one digit")
        XCTAssertFalse(MCPHTTPEndpoint.looksLikeToken("2026-11-27T10:00"), "a colon is no token's")
    }

    func testErrorsNameTheKeyAndLine() {
        assertRejected("[mcp.x]\ncommand = \"a\"\nurl = \"http://127.0.0.1/mcp\"",
                       "config.toml: line 3: mcp.x.url cannot be given with command: a server is either run (command) or reached over HTTP (url)")
        assertRejected("[mcp.x]\nurl = \"ftp://host/mcp\"", "config.toml: line 2: mcp.x.url must be an http:// or https:// URL without spaces or control characters")
        assertRejected("[mcp.x]\nurl = \"http://h/mcp\"\nargs = [\"a\"]",
                       "config.toml: line 3: mcp.x.args is for a server run with command; this one is reached over HTTP (url)")
        assertRejected("[mcp.x]\ncommand = \"a\"\nheaders = { A = \"b\" }",
                       "config.toml: line 3: mcp.x.headers is for a server over HTTP (url); this one is run with command")
        assertRejected("[mcp.x]\nurl = \"http://h/mcp\"\nheader_env = { X-Key = \"MISSING\" }",
                       "config.toml: line 3: mcp.x.header_env.X-Key names MISSING, which is not set in confabd's environment")
        assertRejected("[mcp.x]\nurl = \"http://h/mcp\"\nbearer_token_env = \"MISSING\"",
                       "config.toml: line 3: mcp.x.bearer_token_env names MISSING, which is not set in confabd's environment")
        assertRejected("[mcp.x]\nurl = \"http://h/mcp\"\nheaders = { Authorization = \"Basic abc\" }\nbearer_token_env = \"T\"",
                       "config.toml: line 4: mcp.x.bearer_token_env cannot be given with an Authorization header: the header comes from one place",
                       environment: ["T": "token-123456"])
        assertRejected("[mcp.x]\nurl = \"http://h/mcp\"\nbearer_token_file = \"/nonexistent/token\"",
                       "config.toml: line 3: mcp.x.bearer_token_file cannot be used: cannot read the token file /nonexistent/token: No such file or directory")
        assertRejected("[mcp.x]\nurl = \"http://h/mcp\"\nheaders = { Mcp-Session-Id = \"s\" }",
                       "config.toml: line 3: mcp.x.headers sets Mcp-Session-Id, which the transport sets itself")
        assertRejected("[mcp.x]\nurl = \"http://h/mcp\"\nheaders = { X-A = \"1\" }\nheader_env = { x-a = \"V\" }",
                       "config.toml: line 4: mcp.x.header_env.x-a is given in headers too: a header comes from one place", environment: ["V": "v"])
    }
}
