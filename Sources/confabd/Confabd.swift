import ArgumentParser
import Broker
import ConfabLog
import ConfabProtocol
import Config
import DaemonSettings
import EventLoop
import LogStore
import Posix
import ServiceSettings
import Upstream
#if canImport(Glibc)
import Glibc
#endif

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

    /// `confabd --run-bound-to PID -- PROGRAM ARGS…` is how the daemon starts an MCP server
    /// (EventLoop's `ParentBoundExec`): handled before the command line is parsed, and never
    /// returns then.
    static func main() {
        ParentBoundExec.runIfAsked(CommandLine.arguments)
        main(nil)
    }

    func run() throws {
        // Before anything is opened: a crash report must not dump memory the key may be in.
        CrashReport.restartWithoutRegisterDumps()
        // A long log read once must not leave the heap holding what later large arrays freed.
        LargeAllocations.mappedOnTheirOwn()
        let environment = ProcessEnvironment.current()
        // libuv leaves SIGPIPE alone; the first write to a vanished client would kill us.
        signal(SIGPIPE, SIG_IGN)
        guard let level = Logger.Level(name: logLevel) else {
            throw ValidationError("--log-level must be one of error, warning, notice, info, debug")
        }
        // Nowhere to report a failed write of the daemon's own log.
        let logger = Logger(level: level, journal: environment["JOURNAL_STREAM"] != nil) { line in _ = Files.writeAll(2, Array(line.utf8)) }
        let notifier = Notifier(environment: environment)
        let paths = ConfabPaths(environment: environment)
        let configPath = config ?? paths.configFile

        do {
            try serve(paths: paths, configPath: configPath, environment: environment, logger: logger, notifier: notifier)
        } catch {
            logger.error("\(error)")
            notifier.send("STATUS=failed to start: \(Self.oneLine("\(error)"))")
            throw ExitCode(1)
        }
    }

    private func serve(paths: ConfabPaths, configPath: String, environment: [String: String], logger: Logger, notifier: Notifier) throws {
        let settings = try Settings.load(path: configPath, required: config != nil, environment: environment)
        var logger = logger
        logger.redacting = { [secrets = settings.secrets] in secrets.redacting($0) }
        for warning in settings.warnings { logger.warning(warning) }
        let files = OpenFileLimit.raiseToHardLimit()
        if files.after != files.before {
            logger.info("open files limit raised from \(files.before) to \(files.after): one per conversation log")
        }

        let loop = try Loop()
        let dataDirectory = dataDir ?? paths.dataDirectory
        let store: LogStore
        do {
            store = try LogStore(directory: dataDirectory, loop: loop, syncEnabled: settings.fsync)
        } catch {
            throw StartupError(description: "data directory \(dataDirectory): \(error)")
        }
        let upstream = UpstreamClient(loop: loop)
        let broker = Broker(loop: loop, store: store, upstream: upstream, settings: settings, logger: logger,
                            mcpLauncher: ParentBoundExec.launcher() ?? [])

        let listener = try UnixListener(loop: loop)
        let bound = try listen(listener, paths: paths, environment: environment, logger: logger)
        // Listening before the logs load lets clients that connect meanwhile wait in the
        // backlog instead of being refused; none is accepted until the loop runs, after loading.
        try broker.serve(listener)
        let loaded = Self.loadLogs(broker, notifier: notifier)
        logger.notice("confabd \(ProtocolVersion.confabVersion) ready: \(Self.count(loaded, "conversation")), data in \(dataDirectory), upstream \(settings.upstream.baseURL) model \(settings.upstream.model ?? "none")\(Self.describe(settings))")
        if settings.upstream.requiresKey && (settings.upstream.apiKey ?? "").isEmpty {
            logger.warning("no API key for \(settings.upstream.baseURL): set upstream.api_key in \(configPath), the openai-api-key credential or OPENAI_API_KEY; replies will fail until then")
        }
        #if DEBUG
        // Debug builds only (a release build has no such variable): a real crash, once the
        // settings and their API key are in memory, for CrashReportTests to read the report.
        if environment["CONFAB_DEBUG_CRASH_WHEN_READY"] == "1" {
            fatalError("crash asked for by CONFAB_DEBUG_CRASH_WHEN_READY")
        }
        // And a misbehaviour of its own for the long checks' self-tests (LogStore's DebugFault).
        if let name = environment[DebugFault.variable] {
            guard let fault = DebugFault(rawValue: name) else {
                throw StartupError(description: "\(DebugFault.variable)=\(name): none such; one of \(DebugFault.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            logger.warning("debug fault \(fault.rawValue) on: this daemon misbehaves on purpose")
        }
        #endif

        // The socket accepts from here on (bound and listening, or systemd's), so READY=1 is true.
        let status = ServiceStatus { [unowned broker] in Self.summary(broker) }
        notifier.send("READY=1\nSTATUS=\(status.said())")
        let ticker = Self.feedWatchdog(loop: loop, notifier: notifier, status: status, logger: logger)
        let signals = SignalWatchers()
        try stopOnSignals(signals, loop: loop, broker: broker, notifier: notifier, status: status, logger: logger)
        try reloadOnHangup(signals, loop: loop, broker: broker, settings: settings, configPath: configPath, environment: environment,
                           notifier: notifier, status: status, logger: logger)

        loop.run()

        ticker.close()
        upstream.close()
        broker.closeLogs()
        // libuv removed the path when the listener closed; this only covers a listener that
        // never got that far, and never touches a socket someone else has bound there since.
        bound?.removeIfOurs()
        loop.close()
        logger.notice("confabd stopped")
    }

    /// The socket systemd passed, or one bound here (only a socket this process bound is ever
    /// removed by it; systemd's stays where it is).
    private func listen(_ listener: UnixListener, paths: ConfabPaths, environment: [String: String], logger: Logger) throws -> Listening.Bound? {
        if let activated = try Listening.activated(environment: environment, logger: logger) {
            try listener.open(fileDescriptor: activated.fileDescriptor)
            logger.info("listening on \(activated.path ?? "an unnamed socket"), passed by systemd")
            if let socket, socket != activated.path {
                logger.notice("--socket \(socket) ignored: systemd passed the socket to listen on")
            }
            return nil
        }
        let path = socket ?? paths.socket
        let bound = try Listening.bind(listener, path: path)
        logger.info("listening on \(path)")
        return bound
    }

    /// Start-up lists conversations from the index and reads only the logs it cannot vouch
    /// for: usually none or a few, but all of them the first time (logs from a confabd before
    /// the index, or a lost index), which with a large history outlasts systemd's start
    /// timeout and the watchdog. While logs are read, tell systemd the start goes on (from the
    /// first log on, then about once a second) and feed the watchdog.
    private static func loadLogs(_ broker: Broker, notifier: Notifier) -> Int {
        let loadStarted = Notifier.monotonicMicroseconds
        var lastProgress: UInt64?
        return broker.load { done, total in
            let now = Notifier.monotonicMicroseconds
            guard notifier.isActive, done < total, lastProgress.map({ now - $0 >= 1_000_000 }) ?? true else { return }
            lastProgress = now
            let elapsed = (now - loadStarted) / 1_000_000
            notifier.send("EXTEND_TIMEOUT_USEC=\(Notifier.startExtension)\nSTATUS=reading conversation logs: \(done) of \(total) read, \(elapsed) s"
                          + (notifier.watchdog == nil ? "" : "\nWATCHDOG=1"))
        }
    }

    /// One timer feeds the watchdog at half its interval, from the loop thread, so a stuck loop
    /// stops the pings; the same tick refreshes STATUS= when the counts changed.
    private static func feedWatchdog(loop: Loop, notifier: Notifier, status: ServiceStatus, logger: Logger) -> Timer {
        let ticker = Timer(loop: loop)
        ticker.setKeepsLoopAlive(false)
        guard notifier.isActive else { return ticker }
        let watchdog = notifier.watchdog
        let period = watchdog.map { min(max($0 / 2000, 1), 5000) } ?? 5000
        if let watchdog { logger.info("watchdog: \(watchdog / 1000) ms, pinging every \(period) ms") }
        ticker.start(after: period, repeat: period) {
            var lines: [String] = watchdog == nil ? [] : ["WATCHDOG=1"]
            if let changed = status.changed() { lines.append("STATUS=\(changed)") }
            if !lines.isEmpty { notifier.send(lines.joined(separator: "\n")) }
        }
        return ticker
    }

    /// SIGINT and SIGTERM: a bounded shutdown, then the loop stops.
    private func stopOnSignals(_ signals: SignalWatchers, loop: Loop, broker: Broker, notifier: Notifier,
                               status: ServiceStatus, logger: Logger) throws {
        for signum in [SIGINT, SIGTERM] {
            let watcher = SignalWatcher(loop: loop)
            try watcher.start(signal: signum) { signum in
                logger.notice("signal \(signum == SIGINT ? "SIGINT" : "SIGTERM"): shutting down")
                status.stopping = true
                notifier.send("STOPPING=1\nSTATUS=\(status.said())")
                broker.shutdown(reason: signum == SIGINT ? "SIGINT" : "SIGTERM") { loop.stop() }
                // Further signals (and reloads) are not needed: shutdown is bounded by its own deadline.
                for watcher in signals.all { watcher.close() }
            }
            signals.all.append(watcher)
        }
    }

    /// SIGHUP: the config read again; a config that does not load leaves the old one running.
    private func reloadOnHangup(_ signals: SignalWatchers, loop: Loop, broker: Broker, settings: Settings, configPath: String,
                                environment: [String: String], notifier: Notifier, status: ServiceStatus, logger: Logger) throws {
        let hangup = SignalWatcher(loop: loop)
        let required = config != nil
        try hangup.start(signal: SIGHUP) { _ in
            notifier.send("RELOADING=1\nMONOTONIC_USEC=\(Notifier.monotonicMicroseconds)\nSTATUS=reloading \(configPath)")
            do {
                let fresh = try Settings.load(path: configPath, required: required, environment: environment)
                for warning in fresh.warnings { logger.warning(warning) }
                broker.settings = fresh
                if fresh.fsync != settings.fsync {
                    // Every open log holds the policy it was opened with; switching some of
                    // them mid-run would make the promise depend on the conversation.
                    logger.warning("storage.fsync = \(fresh.fsync) takes effect at the next start; running with fsync = \(settings.fsync)")
                }
                status.reloadProblem = nil
                logger.notice("config reloaded from \(configPath): upstream \(fresh.upstream.baseURL) model \(fresh.upstream.model ?? "none")\(Self.describe(fresh))")
            } catch {
                status.reloadProblem = "config reload rejected, old settings kept"
                logger.error("config reload rejected, keeping the old one: \(error)")
            }
            notifier.send("READY=1\nSTATUS=\(status.said())")
        }
        signals.all.append(hangup)
    }

    /// `1 conversation`, `2 conversations`.
    static func count(_ number: Int, _ noun: String) -> String { "\(number) \(noun)" + (number == 1 ? "" : "s") }

    static func summary(_ broker: Broker) -> String {
        let counts = broker.counts
        var text = "\(Self.count(counts.conversations, "conversation")), \(Self.count(counts.clients, "client")), \(Self.count(counts.streams, "stream"))"
        if counts.queued > 0 { text += ", \(counts.queued) queued" }
        return text
    }

    /// The providers besides `[upstream]`, for the log: where each is and which is the default.
    static func describe(_ settings: Settings) -> String {
        var text = settings.providers.map { "; provider \($0.name) (\($0.api.name)) \($0.config.baseURL)" }.joined()
        if settings.defaultProvider != Provider.defaultName { text += "; default provider \(settings.defaultProvider)" }
        if !settings.profiles.isEmpty { text += "; profiles \(settings.profiles.map(\.name).joined(separator: ", "))" }
        if let profile = settings.defaultProfile { text += "; default profile \(profile)" }
        if !settings.tools.isEmpty { text += "; tools \(settings.tools.names.joined(separator: ", "))" }
        return text
    }

    /// STATUS= is one line.
    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}

/// What `systemctl status` shows: the counts, whether the daemon is stopping, and whether the
/// last reload failed; the last line said, so the watchdog's tick says only a change.
final class ServiceStatus {
    var stopping = false
    var reloadProblem: String?
    private var last = ""
    private let counts: () -> String

    init(counts: @escaping () -> String) { self.counts = counts }

    var current: String {
        if stopping { return "stopping: \(counts())" }
        return counts() + (reloadProblem.map { "; \($0)" } ?? "")
    }

    /// The current status, remembered as said.
    func said() -> String {
        last = current
        return last
    }

    /// The current status if it differs from the last one said (then remembered), else nil.
    func changed() -> String? {
        let now = current
        guard now != last else { return nil }
        last = now
        return now
    }
}

/// The daemon's signal watchers, kept together so a stop closes them all.
final class SignalWatchers {
    var all: [SignalWatcher] = []
}
