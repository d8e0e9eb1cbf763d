import ConfabLog
import ConfabProtocol
import DaemonSettings
import EventLoop
import MCP
import ServiceSettings
import Tools

/// The configured MCP servers as the daemon runs them, by name. A server starts when a
/// conversation first offers its tools and keeps running for every conversation after; a
/// reload replaces the servers whose settings changed and stops those no longer configured.
final class MCPServers {
    let loop: Loop
    private let launcher: [String]
    let settings: CurrentSettings
    private(set) var byName: [String: MCPServer] = [:]
    /// Servers being stopped (replaced or removed by a reload, or at shutdown).
    private var stopping: [ObjectIdentifier: MCPServer] = [:]
    /// The HTTP client of servers over HTTP, made with the first of them.
    private var http: MCPHTTPClient?

    init(loop: Loop, launcher: [String], settings: CurrentSettings) {
        self.loop = loop
        self.launcher = launcher
        self.settings = settings
        update()
    }

    /// Takes the servers of the settings in force.
    func update() {
        let configured = settings.value.mcpServers
        for (name, server) in byName where !configured.contains(server.settings) {
            byName[name] = nil
            settings.logger.notice("mcp=\(name) no longer configured as it runs: stopping it")
            stop(server) {}
        }
        // A server kept as it runs that was given up on may be tried again: the reload is the
        // user's word that something changed.
        for server in byName.values where server.hasGivenUp {
            server.forgetFailures()
            if server.settings.start == .always { server.whenReady { _ in } }
        }
        for entry in configured where byName[entry.name] == nil {
            if entry.http != nil, http == nil { http = MCPHTTPClient(loop: loop) }
            let server = MCPServer(settings: entry, loop: loop, launcher: launcher, http: entry.http == nil ? nil : http) { [unowned self] level, text in
                settings.logger.log(level, "mcp=\(entry.name) \(text)")
            }
            byName[entry.name] = server
            // `start = "always"`: when the daemon starts, or when a reload adds it.
            if entry.start == .always { server.whenReady { _ in } }
        }
    }

    private func stop(_ server: MCPServer, then: @escaping () -> Void) {
        let key = ObjectIdentifier(server)
        stopping[key] = server
        server.stop { [unowned self] in
            stopping[key] = nil
            then()
        }
    }

    /// Shutdown: every server is stopped (stdin closed, SIGTERM, SIGKILL: bounded by the
    /// grace periods; a server over HTTP: its session ended, as long at most); `then` runs once
    /// all have exited.
    func stopAll(then allStopped: @escaping () -> Void) {
        let all = Array(byName.values) + Array(stopping.values)
        byName = [:]
        let then = { [unowned self] in
            http?.close()
            http = nil
            allStopped()
        }
        var left = all.count
        guard left > 0 else { return then() }
        for server in all {
            let key = ObjectIdentifier(server)
            stopping[key] = server
            server.stop { [unowned self] in
                stopping[key] = nil
                left -= 1
                if left == 0 { then() }
            }
        }
    }
}
