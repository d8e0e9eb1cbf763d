import XCTest

import Config
import DaemonSettings
import Foundation
import ServiceSettings
import Tools

final class MCPSettingsTests: XCTestCase {
    func testEveryKey() throws {
        let settings = try load("""
            [mcp.git]
            command = "uvx"
            args = ["mcp-server-git", "--repository", "/srv/repo"]
            env = { GIT_AUTHOR_NAME = "confab" }
            cwd = "/srv"
            approval = "never"
            tools = ["git_status", "git_log"]
            timeout_seconds = 5
            startup_timeout_seconds = 7

            [mcp.time]
            command = "mcp-server-time"

            [profiles.p]
            tools = ["git", "time.get_current_time"]
            """, environment: ["PATH": "/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "XDG_CONFIG_HOME": "/x",
                               "OPENAI_API_KEY": "sk-secret", "AWS_SECRET_ACCESS_KEY": "s"])
        XCTAssertEqual(settings.mcpServers.count, 2)
        let git = settings.mcpServers[0]
        XCTAssertEqual(git.name, "git")
        XCTAssertEqual(git.command, "uvx")
        XCTAssertEqual(git.arguments, ["mcp-server-git", "--repository", "/srv/repo"])
        XCTAssertEqual(git.workingDirectory, "/srv")
        XCTAssertEqual(git.approval, .never)
        XCTAssertEqual(git.tools, ["git_status", "git_log"])
        XCTAssertEqual(git.timeoutSeconds, 5)
        XCTAssertEqual(git.startupTimeoutSeconds, 7)
        XCTAssertEqual(git.childEnvironment, ["PATH": "/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "XDG_CONFIG_HOME": "/x",
                                              "GIT_AUTHOR_NAME": "confab"], "the daemon's secrets are not passed on")
        let time = settings.mcpServers[1]
        XCTAssertEqual(time.approval, .always, "a server's calls wait for a person's yes unless the config says never")
        XCTAssertNil(time.tools)
        XCTAssertEqual(time.timeoutSeconds, 60)
        XCTAssertEqual(time.startupTimeoutSeconds, 30)
        XCTAssertEqual(settings.profiles.first?.tools, ["git", "time.get_current_time"])
    }

    func testErrorsNameTheKeyAndLine() {
        assertRejected("[mcp.x]\nargs = []", "config.toml: line 1: mcp.x needs a command (the program that runs the server) or a url (a server over HTTP)")
        assertRejected("[mcp.x]\ncommand = \"a\"\napproval = \"sometimes\"",
                       "config.toml: line 3: mcp.x.approval must be \"always\" or \"never\", not \"sometimes\"")
        assertRejected("[mcp.x]\ncommand = \"a\"\ntimeout_seconds = 0", "config.toml: line 3: mcp.x.timeout_seconds must be between 1 and 3600")
        assertRejected("[mcp.x]\ncommand = \"a\"\ncwd = \"relative\"", "config.toml: line 3: mcp.x.cwd must be an absolute path, not \"relative\"")
        assertRejected("[mcp.x]\ncommand = \"a\"\ncolor = 1", "config.toml: unknown keys: mcp.x.color (line 3)")
        assertRejected("[mcp.x]\ncommand = \"a\"\ntools = [\"t\"]\n[profiles.p]\ntools = [\"x.u\"]",
                       "config.toml: line 5: profiles.p.tools names \"x.u\", which is not among the tools [mcp.x] offers: t")
        assertRejected("[mcp.x]\ncommand = \"a\"\n[profiles.p]\ntools = [\"y\"]",
                       "config.toml: line 4: profiles.p.tools names no configured tool or MCP server: \"y\" (there are: x)")
        assertRejected("[mcp.x]\ncommand = \"a\"\n[profiles.p]\ntools = [\"x\", \"x\"]", "config.toml: line 4: profiles.p.tools names \"x\" twice")
        // Empty names, and a dot without a name on each side, are refused (not a crash at start-up or reload).
        assertRejected("[mcp.x]\ncommand = \"a\"\n[profiles.p]\ntools = [\"\"]", "config.toml: line 4: profiles.p.tools names an empty tool")
        for bad in [".", "x.", ".t", ".."] {
            assertRejected("[mcp.x]\ncommand = \"a\"\n[profiles.p]\ntools = [\"\(bad)\"]",
                           "config.toml: line 4: profiles.p.tools names \"\(bad)\": a server's name must come before the dot and a tool's name after it")
        }
        assertRejected("[tools.t]\ndescription = \"d\"\nrequest = { url = \"http://127.0.0.1/x\" }\n[profiles.p]\ntools = [\".\"]",
                       "config.toml: line 5: profiles.p.tools names \".\": a server's name must come before the dot and a tool's name after it")
        assertRejected("[tools.time]\ndescription = \"d\"\nrequest = { url = \"http://127.0.0.1/x\" }\n[mcp.time]\ncommand = \"a\"",
                       "config.toml: line 4: mcp.time has the name of a [tools.time] table too: a profile's tools = [\"time\"] must name one thing")
    }

    func testStartAndToolApproval() throws {
        let settings = try load("""
            [mcp.fs]
            command = "mcp-server-filesystem"
            approval = "never"
            start = "always"
            tool_approval = { write_file = "always" }

            [mcp.time]
            command = "mcp-server-time"

            [mcp.time.tool_approval]
            convert_time = "never"
            """)
        let fs = settings.mcpServers[0]
        XCTAssertEqual(fs.start, .always)
        XCTAssertEqual(fs.approval(for: "write_file"), .always)
        XCTAssertEqual(fs.approval(for: "read_file"), .never)
        XCTAssertEqual(fs.namedToolsMissing(from: ["read_file"]), ["write_file"])
        let time = settings.mcpServers[1]
        XCTAssertEqual(time.start, .onDemand)
        XCTAssertEqual(time.approval(for: "convert_time"), .never)
        XCTAssertEqual(time.approval(for: "get_current_time"), .always)
        assertRejected("[mcp.x]\ncommand = \"a\"\nstart = \"sometimes\"",
                       "config.toml: line 3: mcp.x.start must be \"always\" or \"on_demand\", not \"sometimes\"")
        assertRejected("[mcp.x]\ncommand = \"a\"\n[mcp.x.tool_approval]\nread = \"always\"\nwrite = \"maybe\"",
                       "config.toml: line 5: mcp.x.tool_approval.write must be \"always\" or \"never\", not \"maybe\"")
        assertRejected("[mcp.x]\ncommand = \"a\"\ntool_approval = { write = 1 }",
                       "config.toml: line 3: mcp.x.tool_approval.write must be a string, not an integer")
    }

    /// Writes `json` next to a config file that names it; the settings it gives.
    private func loadServersFile(_ json: String, config: String = "") throws -> Settings {
        let directory = NSTemporaryDirectory() + "confab-mcp-json-\(getpid())-\(name.hashValue)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        try json.write(toFile: directory + "/servers.json", atomically: true, encoding: .utf8)
        return try Settings.load(text: "mcp_servers_file = \"servers.json\"\n" + config, path: directory + "/config.toml",
                                 environment: ["PATH": "/bin", "SECRET": "s"])
    }

    func testTheMCPServersJSONFile() throws {
        let settings = try loadServersFile("""
            {"mcpServers": {
              "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"GIT_DIR": "/r"}, "type": "stdio",
                      "autoApprove": ["git_status"], "timeout": 60},
              "old": {"command": "x", "disabled": true},
              "web": {"type": "http", "url": "https://mcp.example.com/mcp",
                      "headers": {"Authorization": "Bearer tok-file-1234", "X-Team": "support"}}
            }, "globalShortcut": "x"}
            """, config: "[profiles.p]\ntools = [\"git\", \"web\"]\n")
        XCTAssertEqual(settings.mcpServers.map(\.name), ["git", "web"], "a disabled entry is left out")
        let git = try XCTUnwrap(settings.mcpServers.first)
        XCTAssertEqual(git.name, "git")
        XCTAssertEqual(git.command, "uvx")
        XCTAssertEqual(git.arguments, ["mcp-server-git"])
        XCTAssertEqual(git.childEnvironment, ["PATH": "/bin", "GIT_DIR": "/r"])
        XCTAssertEqual(git.approval(for: "git_status"), .never)
        XCTAssertEqual(git.approval(for: "git_commit"), .always)
        let web = try XCTUnwrap(settings.mcpServers.first { $0.name == "web" })
        XCTAssertEqual(web.http?.url, "https://mcp.example.com/mcp")
        XCTAssertEqual(web.http?.headers, [ToolHeader(name: "Authorization", value: "Bearer tok-file-1234", isSecret: true),
                                           ToolHeader(name: "X-Team", value: "support")])
        XCTAssertEqual(web.childEnvironment, [:], "nothing of the daemon's environment goes to a server it does not run")
        XCTAssertTrue(settings.secrets.redacting("Bearer tok-file-1234").contains("[secret]"), "a credential header is a secret")
        XCTAssertEqual(settings.warnings.count, 2)
        XCTAssertTrue(settings.warnings[0].hasSuffix("servers.json: ignored keys this daemon does not use: globalShortcut, mcpServers.git.timeout"),
                      settings.warnings[0])
        // Written with the usual umask, others can read it, and it holds the Authorization header.
        XCTAssertTrue(settings.warnings[1].hasSuffix("servers.json holds an MCP server's credentials and can be read by others: chmod 600 "
                                                     + settings.warnings[1].split(separator: " ").last.map(String.init)!), settings.warnings[1])
    }

    func testTheMCPServersJSONFileErrorsNameTheFileAndTheServer() {
        func rejected(_ json: String, config: String = "", _ expected: String, line: UInt = #line) {
            XCTAssertThrowsError(try loadServersFile(json, config: config), line: line) { error in
                let text = (error as? ConfigError)?.description ?? "\(error)"
                XCTAssertTrue(text.contains(expected) && text.contains("servers.json"), text, line: line)
            }
        }
        rejected(#"{"mcpServers": {"web": {"type": "sse", "url": "http://127.0.0.1:8000/sse"}}}"#,
                 "servers.json: mcpServers.web.type is \"sse\": this daemon speaks stdio (command) and Streamable HTTP (\"http\", \"streamable-http\"), not the older SSE transport")
        rejected(#"{"mcpServers": {"web": {"type": "streamable-http", "command": "x"}}}"#,
                 "servers.json: mcpServers.web needs a url: the server's Streamable HTTP endpoint")
        rejected(#"{"mcpServers": {"web": {"url": "http://127.0.0.1:8000/mcp", "args": []}}}"#,
                 "servers.json: mcpServers.web.args is for a server run with command; this one is reached over HTTP (url)")
        rejected(#"{"mcpServers": {"web": {"url": "ftp://127.0.0.1/mcp"}}}"#,
                 "servers.json: mcpServers.web.url must be an http:// or https:// URL without spaces or control characters")
        rejected(#"{"mcpServers": {"web": {"url": "http://127.0.0.1/mcp", "headers": {"X-A": "a\nb"}}}}"#,
                 "servers.json: mcpServers.web.headers.X-A must not hold line breaks or control characters")
        rejected(#"{"mcpServers": {"web": {"url": "http://127.0.0.1/mcp", "headers": {"Mcp-Session-Id": "1"}}}}"#,
                 "servers.json: mcpServers.web.headers sets Mcp-Session-Id, which the transport sets itself")
        rejected(#"{"mcpServers": {"git": {"command": "x", "args": ["a", 1]}}}"#, "servers.json: mcpServers.git.args[1] must be a string")
        rejected(#"{"mcpServers": {"git": {"args": []}}}"#, "servers.json: mcpServers.git needs a command (the program that runs the server) or a url (a server over HTTP)")
        rejected(#"{"mcpServers": {"git": {"command": "x", "env": {"A": 1}}}}"#, "servers.json: mcpServers.git.env.A must be a string")
        rejected(#"{"mcpServers": {"git": {"command": "x"}}}"#, config: "[mcp.git]\ncommand = \"y\"\n",
                 "servers.json: mcpServers.git is also a [mcp.git] table in ")
        rejected(#"{"servers": {}}"#, "servers.json: has no \"mcpServers\" object")
        rejected(#"{"mcpServers": {"#, "servers.json: is not JSON")
    }

    /// One draft for both forms, checked once: the same mistake in a `[mcp.NAME]` table and in
    /// the `mcpServers` file gets the same message; only where it points differs (the table's
    /// line, the file's key path).
    func testTheSameMistakeGetsTheSameMessageInBothForms() throws {
        let cases: [(toml: String, json: String, message: String)] = [
            ("command = \"a\"\ncwd = \"relative\"", #"{"command": "a", "cwd": "relative"}"#, ".cwd must be an absolute path, not \"relative\""),
            ("command = \"a\"\nenv = { \"A=B\" = \"v\" }", #"{"command": "a", "env": {"A=B": "v"}}"#,
             ".env holds \"A=B\", which is not an environment variable name"),
            ("args = []", #"{"args": []}"#, " needs a command (the program that runs the server) or a url (a server over HTTP)"),
            ("url = \"http://127.0.0.1/mcp#x\"", #"{"url": "http://127.0.0.1/mcp#x"}"#, ".url must not hold a fragment (#…): it is never sent"),
            ("url = \"ftp://127.0.0.1/mcp\"", #"{"url": "ftp://127.0.0.1/mcp"}"#,
             ".url must be an http:// or https:// URL without spaces or control characters"),
            ("url = \"http://127.0.0.1/mcp\"\nargs = []", #"{"url": "http://127.0.0.1/mcp", "args": []}"#,
             ".args is for a server run with command; this one is reached over HTTP (url)"),
            ("url = \"http://127.0.0.1/mcp\"\ncommand = \"a\"", #"{"url": "http://127.0.0.1/mcp", "command": "a"}"#,
             ".url cannot be given with command: a server is either run (command) or reached over HTTP (url)"),
            ("url = \"http://127.0.0.1/mcp\"\nheaders = { \"Mcp-Session-Id\" = \"1\" }", #"{"url": "http://127.0.0.1/mcp", "headers": {"Mcp-Session-Id": "1"}}"#,
             ".headers sets Mcp-Session-Id, which the transport sets itself"),
            ("url = \"http://127.0.0.1/mcp\"\nheaders = { \"X-A\" = \"a\\nb\" }", #"{"url": "http://127.0.0.1/mcp", "headers": {"X-A": "a\nb"}}"#,
             ".headers.X-A must not hold line breaks or control characters"),
            ("url = \"http://127.0.0.1/mcp\"\nheaders = { \"X A\" = \"b\" }", #"{"url": "http://127.0.0.1/mcp", "headers": {"X A": "b"}}"#,
             ".headers.X A is not an HTTP header name"),
        ]
        for (toml, json, message) in cases {
            var fromTable = ""
            XCTAssertThrowsError(try load("[mcp.x]\n" + toml)) { fromTable = (($0 as? ConfigError)?.description ?? "\($0)") }
            var fromFile = ""
            XCTAssertThrowsError(try loadServersFile(#"{"mcpServers": {"x": "# + json + "}}")) { fromFile = (($0 as? ConfigError)?.description ?? "\($0)") }
            XCTAssertTrue(fromTable.hasPrefix("config.toml: line ") && fromTable.hasSuffix(": mcp.x" + message), fromTable)
            XCTAssertTrue(fromFile.hasSuffix("servers.json: mcpServers.x" + message), fromFile)
        }
    }
}
