import ArgumentParser
import Posix

/// `confab web …`: the browser gateway's links, made by `confab-web` (installed beside
/// confab), which keeps the owner's token and the share links.
struct Web: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web",
        abstract: "Links for the browser gateway (confab-web).",
        discussion: """
            confab web --url               print the owner's link (it holds the owner's token)
            confab web share ID [--read-only] [--expires 2h|never]
                                           a link that shows one conversation only
            confab web shares              the share links that still work
            confab web revoke SHARE        stop a share link at once
            confab web rotate              a new owner's token (old links stop working)
            """)

    @Flag(help: "Print the owner's link.") var url = false
    @Argument(parsing: .captureForPassthrough, help: "share, shares, revoke or rotate, and their arguments.")
    var arguments: [String] = []

    func run() throws {
        var forwarded = arguments
        if url || forwarded.isEmpty { forwarded.insert("url", at: 0) }
        let status = Spawn.wait([Self.gatewayExecutable()] + forwarded)
        if status != 0 { throw ExitCode(status) }
    }

    /// confab-web beside this executable, else on PATH.
    static func gatewayExecutable() -> String {
        if let me = Files.linkTarget("/proc/self/exe"), let slash = me.lastIndex(of: "/") {
            let beside = String(me[..<slash]) + "/confab-web"
            if Files.isExecutable(beside) { return beside }
        }
        return "confab-web"
    }
}
