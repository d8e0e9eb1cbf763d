import Config
import DaemonSettings
import Foundation
import WebConfig
import XCTest

/// A config file, or an `mcp_servers_file`, that others can read and that holds a credential
/// written out is warned about, whatever kind: an API key (as before), an MCP server's
/// credential-named `env` variable, or a credential-named header.
final class SecretFileModeTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "confab-secret-mode-\(getpid())-\(abs(name.hashValue))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    private func write(_ name: String, _ text: String, mode: Int) throws -> String {
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    private func warnings(_ config: String, mode: Int) throws -> [String] {
        let path = try write("config.toml", config, mode: mode)
        return try Settings.load(path: path, required: true, environment: ["PATH": "/bin"]).warnings
    }

    func testAConfigHoldingAnMCPServersEnvCredentialIsWarnedAbout() throws {
        let config = "[mcp.github]\ncommand = \"server\"\nenv = { GITHUB_PERSONAL_ACCESS_TOKEN = \"ghp_abc\", GIT_DIR = \"/r\" }\n"
        let path = directory + "/config.toml"
        XCTAssertEqual(try warnings(config, mode: 0o644),
                       ["\(path) holds a credential in mcp.github.env and can be read by others: chmod 600 \(path)"])
        XCTAssertEqual(try warnings(config, mode: 0o600), [])
        // An env without a credential's name is no secret.
        XCTAssertEqual(try warnings("[mcp.git]\ncommand = \"server\"\nenv = { GIT_DIR = \"/r\" }\n", mode: 0o644), [])
    }

    func testAConfigHoldingACredentialHeaderIsWarnedAbout() throws {
        let path = directory + "/config.toml"
        XCTAssertEqual(try warnings("[mcp.remote]\nurl = \"https://mcp.example.com/mcp\"\nheaders = { Authorization = \"Bearer t0k\" }\n", mode: 0o640),
                       ["\(path) holds a credential header in mcp.remote.headers and can be read by others: chmod 600 \(path)"])
        XCTAssertEqual(try warnings("[tools.t]\ndescription = \"d\"\n[tools.t.request]\nurl = \"http://127.0.0.1/x\"\nheaders = { X-Api-Key = \"k\" }\n", mode: 0o604),
                       ["\(path) holds a credential header in tools.t.request.headers and can be read by others: chmod 600 \(path)"])
        // As before: an API key.
        XCTAssertEqual(try warnings("[upstream]\nbase_url = \"http://127.0.0.1/v1\"\napi_key = \"sk-1\"\n", mode: 0o644),
                       ["\(path) holds an API key and can be read by others: chmod 600 \(path)"])
    }

    func testAnMCPServersFileHoldingCredentialsIsWarnedAbout() throws {
        let servers = try write("servers.json", #"{"mcpServers": {"gh": {"command": "server", "env": {"API_KEY": "k-1"}}}}"#, mode: 0o644)
        let settings = try Settings.load(text: "mcp_servers_file = \"servers.json\"\n", path: directory + "/config.toml", environment: [:])
        XCTAssertEqual(settings.warnings, ["\(servers) holds an MCP server's credentials and can be read by others: chmod 600 \(servers)"])

        _ = try write("servers.json", #"{"mcpServers": {"web": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer b"}}}}"#, mode: 0o644)
        let http = try Settings.load(text: "mcp_servers_file = \"servers.json\"\n", path: directory + "/config.toml", environment: [:])
        XCTAssertEqual(http.warnings, ["\(servers) holds an MCP server's credentials and can be read by others: chmod 600 \(servers)"])

        _ = try write("servers.json", #"{"mcpServers": {"gh": {"command": "server", "env": {"API_KEY": "k-1"}}}}"#, mode: 0o600)
        XCTAssertEqual(try Settings.load(text: "mcp_servers_file = \"servers.json\"\n", path: directory + "/config.toml", environment: [:]).warnings, [])
        _ = try write("servers.json", #"{"mcpServers": {"git": {"command": "server", "env": {"GIT_DIR": "/r"}}}}"#, mode: 0o644)
        XCTAssertEqual(try Settings.load(text: "mcp_servers_file = \"servers.json\"\n", path: directory + "/config.toml", environment: [:]).warnings, [])
    }

    /// `[web]` is read and checked by confabd through the gateway's own type: kept, and a
    /// wrong key refused naming it.
    func testTheWebTableIsTakenAndChecked() throws {
        let settings = try load("[web]\nlisten = \"127.0.0.1:18999\"\nshare_expires = \"2h\"\nshare_read_only = true\n")
        XCTAssertEqual(settings.web.port, 18999)
        XCTAssertEqual(settings.web.shareExpirySeconds, 7200)
        XCTAssertTrue(settings.web.shareReadOnly)
        assertRejected("[web]\nlisten = \"nowhere\"\n",
                       "config.toml: web.listen (line 2): expected HOST:PORT, e.g. \"127.0.0.1:8410\" or \"[::1]:8410\"")
        XCTAssertThrowsError(try load("[web]\nlisten = \"127.0.0.1:8410\"\nshare_expire = \"2h\"\n")) { error in
            XCTAssertTrue("\(error)".contains("web.share_expire"), "\(error)")
        }
        XCTAssertEqual(try load("").web, WebSettings())
    }
}
