import ArgumentParser
import Broker
import ConfabProtocol
import EventLoop
import Foundation
import LogStore
import Upstream

@main
struct Confabd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "confabd",
        abstract: "The confab daemon: owns conversations, streams model replies to every attached client.",
        version: ProtocolVersion.confabVersion)

    @Option(help: "Unix socket to listen on (default: $XDG_RUNTIME_DIR/confab/confabd.sock).")
    var socket: String?

    @Option(help: "Where conversation logs live (default: $XDG_DATA_HOME/confab).")
    var dataDir: String?

    @Option(help: "Config file (default: $XDG_CONFIG_HOME/confab/config.toml; may be absent).")
    var config: String?

    @Option(help: "error, warning, notice, info or debug.")
    var logLevel: String = "info"

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        // libuv leaves SIGPIPE alone; the first write to a vanished client would kill us.
        signal(SIGPIPE, SIG_IGN)
        guard let level = Logger.Level(name: logLevel) else {
            throw ValidationError("--log-level must be one of error, warning, notice, info, debug")
        }
        let logger = Logger(level: level, journal: environment["JOURNAL_STREAM"] != nil)
        let notifier = Notifier(environment: environment)
        let paths = ConfabPaths(environment: environment)
        let configPath = config ?? paths.configFile

        do {
            try serve(paths: paths, configPath: configPath, environment: environment, logger: logger, notifier: notifier)
        } catch {
            logger.error("\(error)")
            throw ExitCode(1)
        }
    }

    private func serve(paths: ConfabPaths, configPath: String, environment: [String: String], logger: Logger, notifier: Notifier) throws {
        let settings = try Settings.load(path: configPath, required: config != nil, environment: environment)
        for warning in settings.warnings { logger.warning(warning) }

        let loop = try Loop()
        let dataDirectory = dataDir ?? paths.dataDirectory
        let store: LogStore
        do {
            store = try LogStore(directory: dataDirectory, loop: loop, syncEnabled: settings.fsync)
        } catch {
            throw StartupError(description: "data directory \(dataDirectory): \(error)")
        }
        let upstream = UpstreamClient(loop: loop, config: settings.upstream)
        let broker = Broker(loop: loop, store: store, upstream: upstream, limits: settings.limits, logger: logger,
                            allowedUIDs: settings.allowedUIDs)

        let listener = try UnixListener(loop: loop)
        var boundPath: String?
        if let fd = Listening.activated(environment: environment) {
            try listener.open(fileDescriptor: fd)
            logger.info("listening on the socket passed by systemd")
        } else {
            let path = socket ?? paths.socket
            try Listening.bind(listener, path: path)
            boundPath = path
            logger.info("listening on \(path)")
        }
        let loaded = broker.load()
        try broker.serve(listener)
        logger.notice("confabd \(ProtocolVersion.confabVersion) ready: \(loaded) conversations, data in \(dataDirectory), upstream \(settings.upstream.baseURL) model \(settings.upstream.model)")
        if settings.upstream.requiresKey && (settings.upstream.apiKey ?? "").isEmpty {
            logger.warning("no API key for \(settings.upstream.baseURL): set upstream.api_key in \(configPath) or OPENAI_API_KEY; replies will fail until then")
        }
        notifier.send("READY=1\nSTATUS=\(summary(broker))")

        var signals: [SignalWatcher] = []
        for signum in [SIGINT, SIGTERM] {
            let watcher = SignalWatcher(loop: loop)
            try watcher.start(signal: signum) { signum in
                logger.notice("signal \(signum == SIGINT ? "SIGINT" : "SIGTERM"): shutting down")
                notifier.send("STOPPING=1")
                broker.shutdown(reason: signum == SIGINT ? "SIGINT" : "SIGTERM") { loop.stop() }
                // Further signals are not needed: shutdown is bounded by its own deadline.
                for watcher in signals { watcher.close() }
            }
            signals.append(watcher)
        }
        let hangup = SignalWatcher(loop: loop)
        try hangup.start(signal: SIGHUP) { _ in
            notifier.send("RELOADING=1")
            do {
                let fresh = try Settings.load(path: configPath, required: config != nil, environment: environment)
                for warning in fresh.warnings { logger.warning(warning) }
                broker.upstream.config = fresh.upstream
                broker.limits = fresh.limits
                broker.allowedUIDs = fresh.allowedUIDs
                logger.notice("config reloaded from \(configPath): upstream \(fresh.upstream.baseURL) model \(fresh.upstream.model)")
            } catch {
                logger.error("config reload rejected, keeping the old one: \(error)")
            }
            notifier.send("READY=1\nSTATUS=\(summary(broker))")
        }
        signals.append(hangup)

        loop.run()

        upstream.close()
        broker.closeLogs()
        if let boundPath { unlink(boundPath) }
        loop.close()
        logger.notice("confabd stopped")
    }

    private func summary(_ broker: Broker) -> String {
        let counts = broker.counts
        return "\(counts.conversations) conversations, \(counts.clients) clients, \(counts.streams) streams"
    }
}
