import ArgumentParser
import ConfabProtocol
import Posix
import WebConfig
import WebGateway

/// Where the gateway finds things; every subcommand takes these.
struct Locations: ParsableArguments {
    @Option(help: "confab's config file (its [web] table is read).")
    var config: String?

    @Option(help: "confabd's socket.")
    var socket: String?

    @Option(help: "Where the owner's token and the share links are kept (default ~/.local/state/confab/web).")
    var stateDir: String?

    @Option(help: "HOST:PORT to listen on, over the config's web.listen.")
    var listen: String?

    var environment: [String: String] {
        var values: [String: String] = [:]
        for name in ["HOME", "XDG_STATE_HOME"] {
            if let value = ProcessEnvironment.variable(name) { values[name] = value }
        }
        return values
    }

    var store: AccessStore { AccessStore(directory: stateDir ?? AccessStore.defaultDirectory(environment: environment)) }
    var socketPath: String { socket ?? ConfabPaths.current().socket }

    func settings() throws -> WebSettings {
        let path = config ?? ConfabPaths.current().configFile
        var settings = WebSettings()
        if let bytes = try? Files.readAll(path: path, limit: 16 << 20) {
            settings = try WebSettings(configText: String(decoding: bytes, as: UTF8.self))
        }
        if let listen {
            guard let (host, port) = WebSettings.parseListen(listen) else {
                throw ValidationError("--listen: expected HOST:PORT, e.g. 127.0.0.1:8410")
            }
            settings.host = host
            settings.port = port
        }
        return settings
    }
}



@main
struct ConfabWeb: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "confab-web",
        abstract: "A browser gateway to confabd: live conversations, share links.",
        subcommands: [Serve.self, URL.self, Share.self, Shares.self, Revoke.self, Rotate.self],
        defaultSubcommand: Serve.self)
}

struct URL: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the owner's link (it holds the owner's token: keep it to yourself).")
    @OptionGroup var locations: Locations

    func run() throws {
        let settings = try locations.settings()
        let token = try locations.store.ownerToken()
        print(settings.ownerURL(token: token))
    }
}

struct Rotate: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Replace the owner's token: pages opened with the old one stop working.")
    @OptionGroup var locations: Locations

    func run() throws {
        let settings = try locations.settings()
        let token = try locations.store.rotateOwnerToken()
        print(settings.ownerURL(token: token))
    }
}

struct Share: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Make a link that shows one conversation, and nothing else.")
    @OptionGroup var locations: Locations

    @Argument(help: "The conversation's id.")
    var conversation: String

    @Flag(help: "The link can watch but not send, cancel, retry or continue.")
    var readOnly = false

    @Flag(help: "The link can send (the default unless web.share_read_only is set).")
    var write = false

    @Option(help: "How long the link works: 30m, 2h, 7d, or never (default web.share_expires, 24h).")
    var expires: String?

    func run() throws {
        let settings = try locations.settings()
        let conversation = try DaemonLookup.conversation(matching: self.conversation, socketPath: locations.socketPath)
        var expiry = settings.shareExpirySeconds
        if let expires {
            if expires == "never" {
                expiry = nil
            } else {
                guard let seconds = WebSettings.parseDuration(expires) else {
                    throw ValidationError("--expires: expected 30m, 2h, 7d or never")
                }
                expiry = seconds
            }
        }
        let readOnly = self.readOnly || (settings.shareReadOnly && !write)
        let share = try locations.store.createShare(conversation: conversation, role: readOnly ? .read : .write, expiresIn: expiry)
        print(settings.shareURL(token: share.token))
        FileHandleOut.error("share \(share.id): \(share.role == .read ? "read-only" : "can send"), " +
                            (share.expires.map { "until " + Timestamp(milliseconds: Int64($0) * 1000).description } ?? "until revoked"))
    }
}

struct Shares: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the share links that still work.")
    @OptionGroup var locations: Locations

    func run() throws {
        let now = AccessStore.now()
        let shares = locations.store.shares().filter { $0.isValid(at: now) }
        if shares.isEmpty {
            print("no share links")
            return
        }
        for share in shares {
            let until = share.expires.map { Timestamp(milliseconds: Int64($0) * 1000).description } ?? "until revoked"
            print("\(share.id)  \(share.conversation)  \(share.role == .read ? "read-only" : "write    ")  \(until)")
        }
    }
}

struct Revoke: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Stop a share link at once (by the id `confab web shares` lists).")
    @OptionGroup var locations: Locations

    @Argument(help: "The share's id (or its token).")
    var share: String

    func run() throws {
        guard try locations.store.revoke(share) else {
            FileHandleOut.error("confab-web: no share link \(share) (confab web shares lists them)")
            throw ExitCode(1)
        }
        print("revoked \(share)")
    }
}

enum FileHandleOut {
    static func error(_ line: String) {
        let text = line + "\n"
        _ = Files.writeAll(2, Array(text.utf8))
    }
}

/// The one question the command line asks confabd: which conversation an id (or a unique
/// prefix of at least 4 characters, as confab takes) names. A blocking call: no server runs here.
enum DaemonLookup {
    static func conversation(matching text: String, socketPath: String) throws -> String {
        guard text.count >= 4, ConversationID.isValidPrefix(text) else {
            throw ValidationError("not a conversation id: \(text)")
        }
        let fd: Int32
        do { fd = try UnixSocket.connect(to: socketPath) } catch {
            FileHandleOut.error("confab-web: cannot reach confabd at \(socketPath): \(error)")
            throw ExitCode(3)
        }
        defer { Descriptor.close(fd) }
        _ = Files.writeAll(fd, RPC.request(id: 1, method: .conversationList, params: ["limit": 10000]))
        var framer = LineFramer(maxLineBytes: 64 << 20)
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var answer: JSON?
        while answer == nil {
            let count = try Descriptor.readSome(fd, into: &buffer)
            guard count > 0 else { break }
            try framer.feed(Array(buffer[0..<count])) { line in
                if case .success(.response(let id, let result)) = RPC.parse(line), id.int == 1 { answer = result }
            }
        }
        let ids = (answer?["conversations"]?.array ?? []).compactMap { $0["id"]?.string }.filter { $0.hasPrefix(text) }
        guard ids.count == 1 else {
            FileHandleOut.error(ids.isEmpty ? "confab-web: no conversation \(text)" : "confab-web: \(text) names several conversations: give more of the id")
            throw ExitCode(1)
        }
        return ids[0]
    }
}
