import ConfabLog
import ConfabProtocol
import Curl
import EventLoop
import Glibc
import ServiceSettings

/// One configured MCP server as the daemon runs it: a child process over stdio, or a server
/// reached over Streamable HTTP (`MCPHTTPTransport`), spoken to through an `MCPSession`, on
/// the loop. Started on first use (`whenReady`); its calls are timed out, cancelled with
/// `notifications/cancelled`, and failed when it exits (over HTTP: when its transport fails).
/// A server that fails (exits, breaks the protocol, cannot start or be reached) is started
/// again after a delay that doubles from `firstRestartMilliseconds` to `maxRestartMilliseconds`;
/// after `maxFailuresInARow` failures it is given up on (`hasGivenUp`) until `restart()`, a
/// reload, or a conversation that needs it once `maxRestartMilliseconds` have passed.
public final class MCPServer {
    /// The delay before the first restart; each failure in a row doubles it, up to the maximum.
    public static let firstRestartMilliseconds: UInt64 = 500
    public static let maxRestartMilliseconds: UInt64 = 30_000
    public static let maxFailuresInARow = 5
    /// A server that was ready this long before it failed ran well: its failures count from zero again.
    public static let stableMilliseconds: UInt64 = 60_000
    /// The least time between two "tool list changed" log lines of one server.
    public static let toolsChangedLogIntervalMilliseconds: UInt64 = 10_000
    /// What may wait to be written to a server's stdin, in bytes and in writes, as the HTTP
    /// transport's outbox is bounded: the daemon answers every request a server sends (`ping`
    /// among them), and a server that sends requests but never reads its input would
    /// otherwise have the daemon hold every answer. Past either bound the server has failed.
    public static let maxQueuedInputBytes = MCPHTTPOutbox.maxBytes
    public static let maxQueuedInputWrites = MCPHTTPOutbox.maxMessages
    /// The longest `level` of a server's `notifications/message` a log line shows, in characters.
    public static let maxLogLevelCharacters = 16

    public enum Status: Equatable, Sendable {
        case stopped, starting, ready
        case failed(String)
    }

    /// One call in flight, for `cancel`.
    public final class Call {
        fileprivate var requestID: Int?
        fileprivate var timer: Timer?
        fileprivate var isOver = false
    }

    public let settings: MCPServerSettings
    public private(set) var status: Status = .stopped
    public var pid: Int32? { process?.pid }
    /// Tools as the server lists them, filtered by `settings.tools`.
    public var tools: [MCPTool] {
        guard let session, session.state == .ready else { return [] }
        guard let offered = settings.tools else { return session.tools }
        return session.tools.filter { offered.contains($0.name) }
    }
    /// Called when the tool list changes after the first listing.
    public var onToolsChanged: (() -> Void)?
    /// Failures since it last ran well (or since `restart()`).
    public private(set) var failuresInARow = 0
    /// It failed `maxFailuresInARow` times in a row and is not restarted on its own; `status` holds the last error.
    public private(set) var hasGivenUp = false
    /// A restart is due after a failure.
    public var isWaitingToRestart: Bool { restartTimer != nil }

    private let loop: Loop
    private let launcher: [String]
    /// The daemon's HTTP client, for a server over HTTP.
    private let http: MCPHTTPClient?
    private let log: (_ level: LogLevel, _ text: String) -> Void
    private var process: ChildProcess?
    /// A server over HTTP: the transport of its current session.
    private var transport: MCPHTTPTransport?
    private var session: MCPSession?
    /// The server's `notifications/message` lines, limited as its stderr is.
    private var logLines = StderrLines()
    private var startupTimer: Timer?
    private var waiters: [(Status) -> Void] = []
    private var stopping = false
    private var onStopped: [() -> Void] = []
    private var stopTimer: Timer?
    /// Counts starts: an exit is of the process of its own start, which a restart may have replaced.
    private var generation = 0
    /// Processes of earlier starts, killed when replaced, until they are reaped.
    private var retired: [Int: ChildProcess] = [:]
    private var restartTimer: Timer?
    /// When the running process became ready: whether it ran well before it failed.
    private var readyAt: UInt64?
    private var gaveUpAt: UInt64?
    private var toolsChangedLoggedAt: UInt64?
    private var toolsChangedUnlogged = 0

    /// `launcher`: a program and arguments the server's command is run through (the daemon's
    /// own start-up shim that ties the server's life to the daemon's); empty: run it directly.
    /// `http`: the HTTP client a server over HTTP is reached with.
    public init(settings: MCPServerSettings, loop: Loop, launcher: [String] = [], http: MCPHTTPClient? = nil,
                log: @escaping (_ level: LogLevel, _ text: String) -> Void) {
        self.settings = settings
        self.loop = loop
        self.launcher = launcher
        self.http = http
        self.log = log
    }

    /// Runs `then` once the server is ready or has failed, starting it if it is stopped or failed.
    public func whenReady(_ then: @escaping (Status) -> Void) {
        switch status {
        case .ready: then(status)
        case .starting: waiters.append(then)
        case .stopped, .failed:
            guard !stopping else { return then(.failed("the daemon is shutting down")) }
            // Between a failure and its restart, waiting is for the restart.
            if restartTimer != nil { return waiters.append(then) }
            if hasGivenUp {
                // Tried again for a conversation that needs it, once the longest delay has passed.
                guard let gaveUpAt, loop.now - gaveUpAt >= Self.maxRestartMilliseconds else { return then(status) }
                hasGivenUp = false
                self.gaveUpAt = nil
                // One more failure gives up again.
                failuresInARow = Self.maxFailuresInARow - 1
                log(.info, "starting again after giving up, for a conversation that needs it")
            }
            waiters.append(then)
            start()
        }
    }

    /// Starts the server now, whatever its state: its calls in flight fail, its failures are
    /// forgotten. Nothing happens while the daemon shuts down.
    public func restart() {
        guard !stopping else { return }
        restartTimer?.close()
        restartTimer = nil
        failuresInARow = 0
        hasGivenUp = false
        gaveUpAt = nil
        if let old = session {
            // Ended first, so its failure is not counted as the server's.
            session = nil
            old.fail("the server was restarted")
        }
        retireRunningProcess()
        log(.info, "restarting on request")
        start()
    }

    /// Ends the running process, if any, as a stop does but without waiting for it: its stdin
    /// closed and its process group sent SIGTERM, then SIGKILL two seconds later should it
    /// still run. Its exit is reaped as a retired one's; a new process may start at once.
    private func retireRunningProcess() {
        guard let previous = process else { return }
        let key = generation
        process = nil
        retired[key] = previous
        previous.input.shutdown { previous.input.close() }
        previous.signalGroup(SIGTERM)
        let timer = Timer(loop: loop)
        timer.setKeepsLoopAlive(false)
        timer.start(after: 2000) { [weak self] in
            timer.close()
            guard let self, let old = retired[key] else { return }
            log(.warning, "pid=\(old.pid) still running 2 s after SIGTERM: SIGKILL")
            old.signalGroup(SIGKILL)
        }
    }

    /// A reload kept this server: one given up on may be started again (a restart already
    /// due is left to happen).
    public func forgetFailures() {
        guard hasGivenUp else { return }
        failuresInARow = 0
        hasGivenUp = false
        gaveUpAt = nil
    }

    /// After a failure that was not asked for: a restart after the delay its failures in a row
    /// call for, or, after too many, giving up.
    private func failed(_ reason: String) {
        guard !stopping, restartTimer == nil else { return }
        if let readyAt, loop.now - readyAt >= Self.stableMilliseconds { failuresInARow = 0 }
        readyAt = nil
        failuresInARow += 1
        if failuresInARow >= Self.maxFailuresInARow {
            hasGivenUp = true
            gaveUpAt = loop.now
            log(.error, "gave up after \(failuresInARow) failures in a row: \(reason)")
            status = .failed("gave up after \(failuresInARow) failures in a row: \(reason)")
            return
        }
        let delay = min(Self.firstRestartMilliseconds << UInt64(failuresInARow - 1), Self.maxRestartMilliseconds)
        log(.warning, "restarting in \(Double(delay) / 1000) s (failure \(failuresInARow) in a row): \(reason)")
        let timer = Timer(loop: loop)
        restartTimer = timer
        timer.start(after: delay) { [unowned self] in
            timer.close()
            guard restartTimer === timer else { return }
            restartTimer = nil
            guard !stopping, status != .ready, status != .starting else { return }
            start()
        }
    }

    private func start() {
        // A restart during start-up: the earlier start's deadline is not this one's.
        startupTimer?.close()
        startupTimer = nil
        if let previous = process {
            // A server that broke the protocol and has not exited yet is not waited for.
            previous.signalGroup(SIGKILL)
            retired[generation] = previous
            process = nil
        }
        // A restart over HTTP: the session it replaces is ended (DELETE, bounded), as a stop ends it.
        transport?.close(endingSession: true)
        transport = nil
        generation += 1
        let mine = generation
        status = .starting
        // The session speaks through the transport the settings name.
        let opened = if let endpoint = settings.http { openHTTP(endpoint) } else { openProcess(generation: mine) }
        guard let session = opened else { return }
        self.session = session
        session.onReady = { [unowned self] in
            log(.info, "ready: protocol \(session.protocolVersion ?? "?"), \(session.tools.count) tools")
            readyAt = loop.now
            warnOfMissingTools(listed: session.tools)
            settle(.ready)
        }
        session.onToolsChanged = { [unowned self] in
            logToolsChanged(session.tools)
            onToolsChanged?()
        }
        session.onFailed = { [unowned self, unowned session] reason in
            // A session of an earlier start, ended by its exit after a restart.
            guard self.session === session else { return }
            log(.warning, "failed: \(reason)")
            settle(.failed(reason))
            // A server that broke the protocol is not spoken to again.
            process?.signalGroup(SIGTERM)
            transport?.close(endingSession: true)
            transport = nil
            failed(reason)
        }
        session.onLog = { [unowned self] level, text in
            let shown = Self.shownLogLevel(level)
            for line in logLines.feed(Array((text + "\n").utf8), now: loop.now) { log(.info, "log \(shown): \(line)") }
        }
        let timer = Timer(loop: loop)
        startupTimer = timer
        let seconds = settings.startupTimeoutSeconds
        timer.start(after: UInt64(seconds) * 1000) { [unowned self] in
            guard status == .starting else { return }
            self.session?.fail("the server did not finish starting within \(seconds) s")
        }
        session.start()
    }

    /// Starts the server's process; the session that speaks to it over its stdin and stdout.
    private func openProcess(generation mine: Int) -> MCPSession? {
        let argv = launcher + [settings.command] + settings.arguments
        let command = ChildCommand(program: argv[0], arguments: Array(argv.dropFirst()),
                                   environment: settings.childEnvironment, workingDirectory: settings.workingDirectory)
        let child: ChildProcess
        do {
            child = try ChildProcess(loop: loop, command: command) { [weak self] exit in self?.exited(exit, generation: mine) }
        } catch {
            let reason = "cannot start \(settings.command): \(error)"
            settle(.failed(reason))
            failed(reason)
            return nil
        }
        process = child
        log(.info, "started pid=\(child.pid)")
        let backlog = InputBacklog()
        let session = MCPSession(clientName: "confabd", clientVersion: "1") { [weak child] line in
            guard let child, let session = backlog.session, !session.isFailed else { return }
            let error = child.input.write([OutboundBuffer(line)], onFailure: { _ in backlog.writes -= 1 }, onWritten: { backlog.writes -= 1 })
            // A pipe that cannot be written to: the server's exit or its closed output says why.
            guard error == nil else { return }
            // Taken whole by the pipe, nothing waits; else the rest waits, and one callback comes.
            let waiting = child.input.writeQueueSize
            if waiting > 0 { backlog.writes += 1 }
            if waiting > Self.maxQueuedInputBytes || backlog.writes > Self.maxQueuedInputWrites {
                session.fail("the server does not read its input: more than \(Self.maxQueuedInputBytes >> 20) MiB or "
                             + "\(Self.maxQueuedInputWrites) messages wait to be written to it")
            }
        }
        backlog.session = session
        // Each start reads with its own framer into its own session: bytes of a replaced
        // process never reach the next one's.
        var framer = LineFramer(maxLineBytes: 16 << 20)
        child.output.startReading { event in
            switch event {
            case .data(let bytes):
                do throws(LineFramer.Failure) {
                    try framer.feed(bytes) { session.receive($0) }
                } catch {
                    session.fail("the server wrote a line longer than \(framer.maxLineBytes) bytes")
                }
            case .endOfFile: session.fail("the server closed its output")
            case .failed(let error): session.fail("cannot read the server's output: \(error)")
            }
        }
        var stderrLines = StderrLines()
        child.errors.startReading { [weak self] event in
            guard let self else { return }
            switch event {
            case .data(let bytes):
                for line in stderrLines.feed(bytes, now: loop.now) { log(.info, "stderr: \(line)") }
            case .endOfFile, .failed:
                for line in stderrLines.finish(now: loop.now) { log(.info, "stderr: \(line)") }
            }
        }
        return session
    }

    /// A server's `level` as a log line shows it: cut to `maxLogLevelCharacters`, with control
    /// characters escaped (the server chooses it; the specification's levels are short words).
    public static func shownLogLevel(_ level: String) -> String {
        StderrLines.escaped(Array(level.utf8), limit: maxLogLevelCharacters)
    }

    /// A new transport to a server over Streamable HTTP; the session that speaks through it.
    /// (The URL is not logged: it may hold a credential.)
    private func openHTTP(_ endpoint: MCPHTTPEndpoint) -> MCPSession? {
        guard let http else {
            settle(.failed("the daemon has no HTTP client for servers over HTTP"))
            return nil
        }
        let transport = MCPHTTPTransport(endpoint: endpoint, multi: http.multi,
                                         timeoutSeconds: max(settings.timeoutSeconds, settings.startupTimeoutSeconds), log: log)
        self.transport = transport
        log(.info, "connecting over HTTP")
        let session = MCPSession(clientName: "confabd", clientVersion: "1") { [weak transport] line in transport?.send(line) }
        transport.onMessage = { [weak session] message in session?.receive(message) }
        transport.onFailure = { [weak session] reason in session?.fail(reason) }
        return session
    }

    /// A server may say its list changed over and over: one line per
    /// `toolsChangedLogIntervalMilliseconds`, saying how many changes went unlogged.
    private func logToolsChanged(_ listed: [MCPTool]) {
        if let last = toolsChangedLoggedAt, loop.now - last < Self.toolsChangedLogIntervalMilliseconds {
            toolsChangedUnlogged += 1
            return
        }
        toolsChangedLoggedAt = loop.now
        let unlogged = toolsChangedUnlogged > 0 ? " (after \(toolsChangedUnlogged) more changes not logged)" : ""
        toolsChangedUnlogged = 0
        log(.info, "tool list changed: \(listed.count) tools\(unlogged)")
        warnOfMissingTools(listed: listed)
    }

    /// The config names tools (`tools`, `tool_approval`) before the server lists any: a name
    /// it does not list is most likely a typo, said once per listing.
    private func warnOfMissingTools(listed: [MCPTool]) {
        let missing = settings.namedToolsMissing(from: listed.map(\.name))
        guard !missing.isEmpty else { return }
        log(.warning, "the config names tools the server does not list: \(missing.joined(separator: ", "))")
    }

    private func settle(_ new: Status) {
        startupTimer?.close()
        startupTimer = nil
        status = new
        let ready = waiters
        waiters = []
        for waiter in ready { waiter(new) }
    }

    private func exited(_ exit: ChildExit, generation exited: Int) {
        if let old = retired.removeValue(forKey: exited) {
            old.closeAll()
            return
        }
        guard exited == generation else { return }
        log(stopping ? .info : .warning, "exited: \(exit)")
        session?.fail("the server exited (\(exit))")
        session = nil
        process?.closeAll()
        process = nil
        if case .ready = status { status = .stopped }
        if stopping {
            stopTimer?.close()
            stopTimer = nil
            let callbacks = onStopped
            onStopped = []
            for callback in callbacks { callback() }
        }
    }

    /// Calls `tool` (the server's own name); `completion` runs once on the loop, `progress`
    /// for each progress notification of the call before that.
    public func call(tool: String, arguments: JSON, progress: ((MCPProgress) -> Void)? = nil,
                     completion: @escaping (MCPCallOutcome) -> Void) -> Call {
        let call = Call()
        let finish: (MCPCallOutcome) -> Void = { outcome in
            guard !call.isOver else { return }
            call.isOver = true
            call.timer?.close()
            call.timer = nil
            completion(outcome)
        }
        whenReady { [weak self] status in
            guard let self, !call.isOver else { return }
            guard status == .ready, let session else {
                if case .failed(let reason) = status { return finish(.failed("the server \(settings.name) is not running: \(reason)")) }
                return finish(.failed("the server \(settings.name) is not running"))
            }
            let name = settings.name
            let onProgress: ((MCPProgress) -> Void)? = progress.map { progress in { update in if !call.isOver { progress(update) } } }
            call.requestID = session.call(tool: tool, arguments: arguments, progress: onProgress) { outcome in
                // The session ended under the call: the server exited or broke the protocol.
                if case .failed(let reason) = outcome { return finish(.failed("the server \(name) failed during the call: \(reason)")) }
                finish(outcome)
            }
            // Failed at once (the session failed while sending it): nothing to time out.
            guard call.requestID != nil, !call.isOver else { return }
            let timer = Timer(loop: loop)
            call.timer = timer
            let seconds = settings.timeoutSeconds
            timer.start(after: UInt64(seconds) * 1000) { [weak self, weak session] in
                guard let self, !call.isOver, let id = call.requestID else { return }
                log(.warning, "call \(id) to \(tool) timed out after \(seconds) s")
                let reason = "the tool did not answer within \(seconds) s"
                finish(.timedOut(reason))
                session?.cancel(id, reason: reason)
            }
        }
        return call
    }

    /// Gives up on `call` (the reply was cancelled): the server is told; its completion does not run.
    public func cancel(_ call: Call, reason: String) {
        guard !call.isOver else { return }
        call.isOver = true
        call.timer?.close()
        call.timer = nil
        if let id = call.requestID { session?.cancel(id, reason: reason) }
    }

    /// Ends the server as the specification's stdio shutdown has it: its stdin closed, then
    /// SIGTERM to its process group after `graceMilliseconds`, then SIGKILL after as long again.
    /// `then` runs once it has exited (at once if it is not running).
    public func stop(graceMilliseconds: UInt64 = 2000, then: @escaping () -> Void) {
        stopping = true
        let wasWaitingToRestart = restartTimer != nil
        restartTimer?.close()
        restartTimer = nil
        for old in retired.values { old.signalGroup(SIGKILL) }
        if status == .starting || wasWaitingToRestart { settle(.failed("the daemon is shutting down")) }
        if let transport {
            // Over HTTP: calls in flight end, and the session is ended (DELETE), bounded.
            self.transport = nil
            session?.fail("the daemon is shutting down")
            transport.close(endingSession: true, seconds: Int(max(1, graceMilliseconds / 1000)), then: then)
            return
        }
        guard let process, process.exit == nil else { return then() }
        onStopped.append(then)
        guard stopTimer == nil else { return }
        process.input.shutdown { process.input.close() }
        let timer = Timer(loop: loop)
        stopTimer = timer
        timer.start(after: graceMilliseconds) { [weak self] in
            guard let self, let process = self.process else { return }
            log(.info, "still running after its input closed: SIGTERM")
            process.signalGroup(SIGTERM)
            timer.start(after: graceMilliseconds) { [weak self] in
                guard let self, let process = self.process else { return }
                log(.warning, "still running after SIGTERM: SIGKILL")
                process.signalGroup(SIGKILL)
            }
        }
    }
}

/// What waits to be written to one server process's stdin: the writes libuv still holds
/// (their bytes are the pipe's write queue), and the session that fails when they pass a bound.
private final class InputBacklog {
    var writes = 0
    weak var session: MCPSession?
}
