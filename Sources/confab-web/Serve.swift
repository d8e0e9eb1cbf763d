import ArgumentParser
import ConfabProtocol
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import NIOCore
import Posix
import WebConfig
import WebGateway
#if canImport(Glibc)
import Glibc  // errno values only
#endif

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the pages (the default).")
    @OptionGroup var locations: Locations

    @Option(help: "debug, info, warning or error.")
    var logLevel: String = "info"

    func run() async throws {
        let settings: WebSettings
        do { settings = try locations.settings() } catch let problem as WebSettings.Problem {
            throw ValidationError(problem.description)
        }
        LoggingSystem.bootstrap { label in JournalLogHandler(label: label) }
        var configuredLogger = Logger(label: "confab-web")
        configuredLogger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let logger = configuredLogger
        let warning: String?
        do { warning = try settings.checkExposure() } catch {
            logger.error("\(error.description)")
            throw ExitCode(2)
        }
        if let warning { logger.warning("\(warning)") }
        let store = locations.store
        _ = try store.ownerToken()
        let gateway = Gateway(store: store, socketPath: locations.socketPath, settings: settings, logger: logger)

        let router = Router(context: GatewayContext.self)
        gateway.addRoutes(to: router)
        let configuration = ApplicationConfiguration(address: .hostname(settings.host, port: settings.port), serverName: nil)
        let server: HTTPServerBuilder = .http1WebSocketUpgrade(webSocketRouter: router)
        var application: any ApplicationProtocol
        if let certificate = settings.tlsCertificate, let key = settings.tlsKey {
            let tls = try TLSConfiguration.makeServerConfiguration(
                certificateChain: NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            application = Application(router: router, server: try .tls(server, tlsConfiguration: tls),
                                      configuration: configuration, onServerRunning: { _ in
                                          logger.info("serving \(settings.baseURL) (TLS), confabd at \(gateway.socketPath)")
                                      }, logger: logger)
        } else {
            application = Application(router: router, server: server, configuration: configuration, onServerRunning: { _ in
                logger.info("serving \(settings.baseURL), confabd at \(gateway.socketPath)")
            }, logger: logger)
        }
        // SIGTERM and SIGINT end it cleanly: the service group stops accepting, closes the
        // pages' WebSockets and their daemon connections, then returns.
        do {
            try await application.runService()
        } catch let error as IOError where error.errnoCode == EADDRINUSE || error.errnoCode == EACCES || error.errnoCode == EADDRNOTAVAIL {
            // NIO's own words ("bind(descriptor:ptr:bytes:): Address already in use (errno: 98)")
            // name neither the address nor what to do.
            let why = switch error.errnoCode {
                case EADDRINUSE: "the address is in use (another confab-web, or another service, listens there)"
                case EACCES: "permission denied (ports below 1024 need privileges)"
                default: "the address is not one of this machine's"
            }
            logger.error("cannot listen on \(settings.host):\(settings.port): \(why); choose another with --listen HOST:PORT or [web] listen")
            throw ExitCode(1)
        }
        logger.info("stopped")
    }
}

/// The routes, and who may see what.
///
/// No token is ever in a cookie, a URL the server sees, or a log: a cookie of 127.0.0.1 goes
/// to every port of the machine (RFC 6265 §8.5), so it would hand the owner's token to any
/// local service a page is made to visit, and any of them could set one. The first visit
/// hands the token to the page in the URL's `#fragment` (never sent); the page keeps it in
/// its origin's storage, which no other port can read, and sends it as a WebSocket
/// subprotocol (`confab-token.TOKEN`) or an `Authorization: Bearer` header. Downloads use
/// one-use tickets asked for over the WebSocket. The HTML, script and style carry no secret
/// and are served to anyone who names the gateway by an allowed `Host`.
struct Gateway: Sendable {
    let store: AccessStore
    let socketPath: String
    let settings: WebSettings
    let logger: Logger
    let pages: AccessSlots
    let downloads: AccessSlots
    let tickets = DownloadTickets()

    init(store: AccessStore, socketPath: String, settings: WebSettings, logger: Logger) {
        self.store = store
        self.socketPath = socketPath
        self.settings = settings
        self.logger = logger
        pages = AccessSlots(limit: settings.maxPages, perLink: settings.maxPagesPerLink,
                            ownerReserved: settings.ownerReservedPages)
        downloads = AccessSlots(limit: settings.maxDownloads, perLink: settings.maxDownloadsPerLink,
                                ownerReserved: settings.maxDownloads > 1 ? 1 : 0)
    }

    var secure: Bool { settings.usesTLS }

    /// The subprotocol the gateway's WebSocket speaks, and the prefix of the one that carries
    /// the page's token.
    static let subprotocol = "confab"
    static let tokenSubprotocolPrefix = "confab-token."

    /// A fetch's token: `Authorization: Bearer TOKEN`.
    static func bearerToken(of request: Request) -> String? {
        guard let value = request.headers[.authorization], value.hasPrefix("Bearer ") else { return nil }
        return String(value.dropFirst("Bearer ".count)).trimmingCharacters(in: .whitespaces)
    }

    /// A WebSocket's token: offered among its subprotocols (a browser can set no header on it).
    static func webSocketToken(of request: Request) -> String? {
        for header in request.headers[values: .secWebSocketProtocol] {
            for item in header.split(separator: ",") {
                let name = item.trimmingCharacters(in: .whitespaces)
                if name.hasPrefix(tokenSubprotocolPrefix) { return String(name.dropFirst(tokenSubprotocolPrefix.count)) }
            }
        }
        return nil
    }

    func page(_ html: String, status: HTTPResponse.Status = .ok) -> Response {
        var headers = Self.securityHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    func json(_ value: JSON, status: HTTPResponse.Status = .ok) -> Response {
        var headers = Self.securityHeaders
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: value.bytes)))
    }

    static var securityHeaders: HTTPFields {
        var headers = HTTPFields()
        headers[.contentSecurityPolicy] = Pages.contentSecurityPolicy
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[.cacheControl] = "no-store"
        return headers
    }

    /// How long a download may make no progress (its reader reads nothing) before it is cut.
    static let stalledDownloadSeconds = 30

    func addRoutes(to router: Router<GatewayContext>) {
        // First, for every route the WebSocket's included: only this gateway's own names.
        router.add(middleware: HostCheck(settings: settings, logger: logger))
        // The pages are shells without a secret: the script asks for everything with the
        // token it keeps. `/s` is where share links land (`/s#token=…`).
        router.get("/") { _, _ -> Response in page(Pages.list) }
        router.get("/s") { _, _ -> Response in page(Pages.list) }
        router.get("/c/:id") { _, context -> Response in
            guard let id = context.parameters.get("id"), ConversationID.isValid(id) else {
                return page(Pages.unauthorized, status: .notFound)
            }
            return page(Pages.conversation(id: id))
        }
        // What a token gives: the page's first question, with the token from the fragment.
        router.get("/api/access") { request, _ -> Response in
            guard let token = Self.bearerToken(of: request), let access = store.access(for: token) else {
                return json(["error": "This link does not work: it was revoked, expired or replaced."], status: .unauthorized)
            }
            switch access {
            case .owner: return json(["role": "owner"])
            case .share(let share):
                return json(["role": .string(share.role.rawValue), "conversation": .string(share.conversation)])
            }
        }
        // A file a message carries, for saving, by a one-use ticket: never shown by the
        // browser (whatever its bytes, it is a download of no type the browser could run).
        router.get("/d/:ticket") { _, context -> Response in await download(context) }
        addAssetRoutes(to: router)
        router.ws("/ws") { request, _ in
            // Only this gateway's own pages are let in: the Origin must be one of its own
            // names (never compared with Host, which a rebound DNS name controls).
            guard let origin = request.headers[.origin], settings.allowsOrigin(origin) else {
                logger.info("refused a WebSocket from origin \(request.headers[.origin] ?? "(none)")")
                throw HTTPError(.forbidden)
            }
            guard let token = Self.webSocketToken(of: request), let access = store.access(for: token) else {
                throw HTTPError(.unauthorized)
            }
            let conversation = request.uri.queryParameters["c"].map(String.init)
            if let conversation {
                guard ConversationID.isValid(conversation), access.maySee(conversation) else { throw HTTPError(.notFound) }
            } else if !access.isOwner {
                throw HTTPError(.forbidden)
            }
            return .upgrade([.secWebSocketProtocol: Self.subprotocol])
        } onUpgrade: { inbound, outbound, context in
            guard let token = Self.webSocketToken(of: context.request), let access = store.access(for: token) else { return }
            // Each page holds a connection to confabd: bounded per link and in all, with
            // places only the owner's pages may take (web.max_pages and the rest).
            if let refusal = pages.take(link: access.linkID) {
                logger.warning("refused a page of \(Self.who(access)): \(refusal)")
                try? await outbound.close(.unknown(4429), reason: "Too many pages are open: \(refusal).")
                return
            }
            defer { pages.give(link: access.linkID) }
            let conversation = context.request.uri.queryParameters["c"].map(String.init)
            await BrowserSession.run(socketPath: socketPath, conversation: conversation, access: access, token: token,
                                     name: Self.displayName(access: access, request: context.request), store: store,
                                     tickets: tickets, inbound: inbound, outbound: outbound, logger: logger)
        }
    }

    /// The page's script, styles and icon: one request each, from the binary itself.
    private func addAssetRoutes(to router: Router<GatewayContext>) {
        for (path, type, bytes) in [("/app.js", "text/javascript; charset=utf-8", Pages.script),
                                    ("/app.css", "text/css; charset=utf-8", Pages.stylesheet),
                                    ("/favicon.svg", "image/svg+xml", Pages.favicon)] {
            router.get(RouterPath(path)) { _, _ -> Response in
                var headers = Self.securityHeaders
                headers[.contentType] = type
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
            }
        }
    }

    /// `/d/TICKET`: the file a one-use ticket names, when its link may still see the
    /// conversation, written as the reader takes it.
    private func download(_ context: GatewayContext) async -> Response {
        let channel = context.channel
        guard let name = context.parameters.get("ticket"), let ticket = tickets.redeem(name),
              let access = store.access(for: ticket.token), access.maySee(ticket.conversation) else {
            return page(Pages.unauthorized, status: .notFound)
        }
        let what = "\(ticket.conversation) \(ticket.message) #\(ticket.index)"
        // The place is held until the last byte is written (or the response is dropped):
        // a client that never reads holds a place, not more memory.
        let hold: AccessSlots.Hold
        switch downloads.hold(link: access.linkID) {
        case .failure(let refusal):
            logger.warning("download of \(what) refused: \(refusal)")
            return page(Pages.unavailable, status: .serviceUnavailable)
        case .success(let granted): hold = granted
        }
        do {
            let (attachment, bytes) = try await AttachmentDownload.fetch(socketPath: socketPath, access: access, conversation: ticket.conversation,
                                                                        message: ticket.message, index: ticket.index, logger: logger)
            var headers = Self.securityHeaders
            headers[.contentType] = "application/octet-stream"
            headers[.contentDisposition] = AttachmentDownload.contentDisposition(name: attachment.name)
            return Response(status: .ok, headers: headers, body: ResponseBody(contentLength: bytes.count) { writer in
                defer { hold.release() }
                // In pieces, each written only once the connection has taken the last
                // (its buffer under NIO's high-water mark, asked on its loop after the
                // writes queued there): the server's response writer takes whatever it is
                // given at once, so the wait is here. A reader that takes nothing for
                // stalledDownloadSeconds is cut off.
                var offset = 0
                while offset < bytes.count {
                    var waited = 0
                    // Asked on the channel's loop, after the writes queued there before.
                    while try await !channel.eventLoop.submit({ channel.isWritable }).get() {
                        guard channel.isActive, waited < Self.stalledDownloadSeconds * 100 else {
                            throw HTTPError(.requestTimeout)
                        }
                        try await Task.sleep(for: .milliseconds(10))
                        waited += 1
                    }
                    let end = min(offset + 64 << 10, bytes.count)
                    try await writer.write(ByteBuffer(bytes: bytes[offset..<end]))
                    offset = end
                }
                try await writer.finish(nil)
                logger.debug("download of \(what): \(bytes.count) bytes written")
            })
        } catch AttachmentDownload.Failure.notFound {
            hold.release()
            return page(Pages.unauthorized, status: .notFound)
        } catch {
            hold.release()
            logger.warning("download of \(what): \(error)")
            return page(Pages.unavailable, status: .serviceUnavailable)
        }
    }

    static func who(_ access: WebAccess) -> String {
        switch access {
        case .owner: return "the owner"
        case .share(let share): return "share link \(share.id)"
        }
    }

    /// What the other screens see this page as: `web:phone`, `web:browser`, `web:share-ID`.
    static func displayName(access: WebAccess, request: Request) -> String {
        switch access {
        case .share(let share): return "web:share-" + share.id
        case .owner:
            let agent = request.headers[.userAgent] ?? ""
            return agent.contains("Mobile") ? "web:phone" : "web:browser"
        }
    }
}

/// The request context: Hummingbird's WebSocket context, and the request's channel (whose
/// writability paces a download).
struct GatewayContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        channel = source.channel
    }
}

/// Every request must name this gateway by an allowed `Host` (web.listen's address,
/// `localhost`, web.hosts): a page of a DNS-rebound name (`attacker.example` resolving to
/// 127.0.0.1) is answered 421 and nothing else.
struct HostCheck<Context: RequestContext>: RouterMiddleware {
    let settings: WebSettings
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let authority = request.head.authority, settings.allowsHost(authority) else {
            logger.info("refused a request for host \(request.head.authority ?? "(none)")")
            var headers = Gateway.securityHeaders
            headers[.contentType] = "text/plain; charset=utf-8"
            return Response(status: .misdirectedRequest, headers: headers,
                            body: .init(byteBuffer: ByteBuffer(string: "This gateway does not answer to that host name.\n")))
        }
        return try await next(request, context)
    }
}
