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
        let gateway = Gateway(store: store, socketPath: locations.socketPath, secure: settings.usesTLS, logger: logger)

        let router = Router(context: BasicWebSocketRequestContext.self)
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
        try await application.runService()
        logger.info("stopped")
    }
}

/// The routes, and who may see what.
struct Gateway: Sendable {
    let store: AccessStore
    let socketPath: String
    let secure: Bool
    let logger: Logger

    static let cookieName = "confab_token"

    func token(of request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for part in header.split(separator: ";") {
                let pair = part.split(separator: "=", maxSplits: 1)
                if pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces) == Self.cookieName {
                    return String(pair[1]).trimmingCharacters(in: .whitespaces)
                }
            }
        }
        return nil
    }

    func access(of request: Request) -> (WebAccess, String)? {
        guard let token = token(of: request), let access = store.access(for: token) else { return nil }
        return (access, token)
    }

    func page(_ html: String, status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) -> Response {
        var headers = Self.securityHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        headers.append(contentsOf: extra)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static var securityHeaders: HTTPFields {
        var headers = HTTPFields()
        headers[.contentSecurityPolicy] = Pages.contentSecurityPolicy
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[.cacheControl] = "no-store"
        return headers
    }

    func cookie(_ token: String, maxAge: Int?) -> HTTPFields {
        var value = "\(Self.cookieName)=\(token); Path=/; HttpOnly; SameSite=Strict"
        if secure { value += "; Secure" }
        if let maxAge { value += "; Max-Age=\(max(maxAge, 1))" }
        return [.setCookie: value]
    }

    var unauthorized: Response { page(Pages.unauthorized, status: .unauthorized) }

    func addRoutes(to router: Router<BasicWebSocketRequestContext>) {
        router.get("/") { request, _ -> Response in
            if let offered = request.uri.queryParameters["token"].map(String.init) {
                // A first visit with the owner's link: the token becomes a cookie, and the
                // address bar loses it.
                guard store.access(for: offered) == .owner else { return unauthorized }
                // Kept for 400 days (browsers' cap), so a phone stays signed in; `confab web
                // rotate` ends it sooner.
                return page(Pages.enter(next: "/"), headers: cookie(offered, maxAge: 400 * 86400))
            }
            guard let (access, _) = access(of: request) else { return unauthorized }
            guard case .owner = access else {
                if case .share(let share) = access {
                    return page(Pages.enter(next: "/c/" + share.conversation))
                }
                return unauthorized
            }
            return page(Pages.list)
        }
        router.get("/c/:id") { request, context -> Response in
            guard let (access, _) = access(of: request) else { return unauthorized }
            guard let id = context.parameters.get("id"), ConversationID.isValid(id), access.maySee(id) else {
                return page(Pages.unauthorized, status: .notFound)
            }
            return page(Pages.conversation(id: id))
        }
        // A file a message carries, for saving: never shown by the browser (whatever its
        // bytes, it is a download of no type the browser could run), under the page's checks.
        let downloads = DownloadSlots(limit: 4)
        router.get("/c/:id/file/:message/:index") { request, context -> Response in
            guard let (access, _) = access(of: request) else { return unauthorized }
            guard let id = context.parameters.get("id"), ConversationID.isValid(id), access.maySee(id),
                  let message = context.parameters.get("message"), AttachmentDownload.isMessageID(message),
                  let index = context.parameters.get("index").flatMap({ Int($0) }), (0..<AttachmentLimits.maxCount).contains(index)
            else {
                return page(Pages.unauthorized, status: .notFound)
            }
            guard downloads.take() else {
                logger.warning("download of \(id) \(message) #\(index) refused: \(downloads.limit) downloads are running")
                return page(Pages.unavailable, status: .serviceUnavailable)
            }
            defer { downloads.give() }
            do {
                let (attachment, bytes) = try await AttachmentDownload.fetch(socketPath: socketPath, access: access, conversation: id, message: message,
                                                                            index: index, logger: logger)
                var headers = Self.securityHeaders
                headers[.contentType] = "application/octet-stream"
                headers[.contentDisposition] = AttachmentDownload.contentDisposition(name: attachment.name)
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
            } catch AttachmentDownload.Failure.notFound {
                return page(Pages.unauthorized, status: .notFound)
            } catch {
                logger.warning("download of \(id) \(message) #\(index): \(error)")
                return page(Pages.unavailable, status: .serviceUnavailable)
            }
        }
        router.get("/s/:token") { request, context -> Response in
            guard let offered = context.parameters.get("token"), case .share(let share)? = store.access(for: offered) else {
                return unauthorized
            }
            let maxAge = share.expires.map { $0 - AccessStore.now() }
            return page(Pages.enter(next: "/c/" + share.conversation), headers: cookie(offered, maxAge: maxAge))
        }
        router.get("/app.js") { _, _ -> Response in
            var headers = Self.securityHeaders
            headers[.contentType] = "text/javascript; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: Pages.script)))
        }
        router.get("/app.css") { _, _ -> Response in
            var headers = Self.securityHeaders
            headers[.contentType] = "text/css; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: Pages.stylesheet)))
        }
        router.ws("/ws") { request, _ in
            // Another site's page may open a WebSocket here with the user's cookie: only
            // this gateway's own pages are let in.
            guard let origin = request.headers[.origin], let host = request.head.authority,
                  origin == (secure ? "https://" : "http://") + host else {
                logger.info("refused a WebSocket from origin \(request.headers[.origin] ?? "(none)")")
                throw HTTPError(.forbidden)
            }
            guard let (access, _) = access(of: request) else { throw HTTPError(.unauthorized) }
            let conversation = request.uri.queryParameters["c"].map(String.init)
            if let conversation {
                guard ConversationID.isValid(conversation), access.maySee(conversation) else { throw HTTPError(.notFound) }
            } else if !access.isOwner {
                throw HTTPError(.forbidden)
            }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            guard let (access, token) = access(of: context.request) else { return }
            let conversation = context.request.uri.queryParameters["c"].map(String.init)
            await BrowserSession.run(socketPath: socketPath, conversation: conversation, access: access, token: token,
                                     name: Self.displayName(access: access, request: context.request), store: store,
                                     inbound: inbound, outbound: outbound, logger: logger)
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

/// Lines as the journal takes them, as confabd writes its own: a syslog priority prefix
/// (`<3>` error … `<7>` debug) under systemd, no time stamp (the journal adds its own),
/// to standard error.
struct JournalLogHandler: LogHandler {
    let label: String
    /// Under systemd (JOURNAL_STREAM set) the priority is a prefix the journal reads;
    /// elsewhere it is spelled out.
    let journal = ProcessEnvironment.variable("JOURNAL_STREAM") != nil
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let priority: Int
        switch event.level {
        case .trace, .debug: priority = 7
        case .info: priority = 6
        case .notice: priority = 5
        case .warning: priority = 4
        case .error: priority = 3
        case .critical: priority = 2
        }
        var line = journal ? "<\(priority)>\(event.message)" : "\(event.level): \(event.message)"
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        for (key, value) in all.sorted(by: { $0.key < $1.key }) { line += " \(key)=\(value)" }
        line = String(line.map { $0 == "\n" ? " " : $0 }) + "\n"
        _ = Files.writeAll(2, Array(line.utf8))
    }
}
