import XCTest

import Config
import DaemonSettings
import MCP

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
        assertRejected("[tools.time]\ndescription = \"d\"\nrequest = { url = \"http://127.0.0.1/x\" }\n[mcp.time]\ncommand = \"a\"",
                       "config.toml: line 4: mcp.time has the name of a [tools.time] table too: a profile's tools = [\"time\"] must name one thing")
    }
}
