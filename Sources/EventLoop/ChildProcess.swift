import CLibUV
import Glibc

/// How a child process ended: its exit status, or the signal that ended it (0 if none).
public struct ChildExit: Sendable, Equatable, CustomStringConvertible {
    public let status: Int64
    public let signal: Int32
    public init(status: Int64, signal: Int32) {
        self.status = status
        self.signal = signal
    }
    public var description: String { signal != 0 ? "killed by signal \(signal)" : "exited with status \(status)" }
}

/// What to run: the program (looked up in the `PATH` of `environment` when it has no slash),
/// its arguments (without the program name), the whole environment it gets (nothing is
/// inherited), and its working directory (the daemon's when nil).
public struct ChildCommand: Sendable, Equatable {
    public var program: String
    public var arguments: [String]
    public var environment: [String: String]
    public var workingDirectory: String?
    public init(program: String, arguments: [String] = [], environment: [String: String] = [:], workingDirectory: String? = nil) {
        self.program = program
        self.arguments = arguments
        self.environment = environment
        self.workingDirectory = workingDirectory
    }
}

/// A child process on the loop with its three standard streams as pipes: `input` is its stdin,
/// `output` its stdout, `errors` its stderr. It runs in a session and process group of its own
/// (so a terminal's signals do not reach it and `signalGroup` reaches everything it started);
/// `onExit` runs once, on the loop, when it has been reaped.
public final class ChildProcess: Handle {
    public let input: UnixStream
    public let output: UnixStream
    public let errors: UnixStream
    public private(set) var pid: Int32 = 0
    public private(set) var exit: ChildExit?
    private var onExit: ((ChildExit) -> Void)?

    private var raw: UnsafeMutablePointer<uv_process_t> { UnsafeMutablePointer(OpaquePointer(handle)) }

    /// Starts `command`. Throws when it could not be started (no such program, a working
    /// directory that is not there, too many open files): then no process exists.
    public init(loop: Loop, command: ChildCommand, onExit: @escaping (ChildExit) -> Void) throws(UVError) {
        input = try UnixStream(loop: loop)
        output = try UnixStream(loop: loop)
        errors = try UnixStream(loop: loop)
        self.onExit = onExit
        super.init(loop: loop, type: UV_PROCESS)

        // Everything C sees is allocated here and freed before init returns: uv_spawn copies
        // what it keeps.
        let argv = [command.program] + command.arguments
        let envp = command.environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = envp.map { strdup($0) } + [nil]
        let cwd = command.workingDirectory.flatMap { strdup($0) }
        defer {
            for pointer in cArgs { free(pointer) }
            for pointer in cEnv { free(pointer) }
            if let cwd { free(cwd) }
        }
        var stdio = [uv_stdio_container_t](repeating: uv_stdio_container_t(), count: 3)
        let streams = [input, output, errors]
        for index in 0..<3 {
            // The flags say what the child does with the pipe: reads stdin, writes the others.
            let direction = index == 0 ? UV_READABLE_PIPE.rawValue : UV_WRITABLE_PIPE.rawValue
            stdio[index].flags = uv_stdio_flags(rawValue: UV_CREATE_PIPE.rawValue | direction)
            stdio[index].data.stream = streams[index].stream
        }
        let rc: Int32 = cArgs.withUnsafeBufferPointer { args in
            cEnv.withUnsafeBufferPointer { env in
                stdio.withUnsafeMutableBufferPointer { stdio in
                    var options = uv_process_options_t()
                    options.file = UnsafePointer(args[0]!)
                    options.args = UnsafeMutablePointer(mutating: args.baseAddress!)
                    options.env = UnsafeMutablePointer(mutating: env.baseAddress!)
                    options.cwd = cwd.map { UnsafePointer($0) }
                    // DETACHED is setsid(2) in the child: its own session and process group.
                    options.flags = UInt32(UV_PROCESS_DETACHED.rawValue)
                    options.stdio_count = 3
                    options.stdio = stdio.baseAddress
                    options.exit_cb = { process, status, signal in
                        let this = Handle.object(process!.pointee.data, as: ChildProcess.self)
                        this.didExit(ChildExit(status: status, signal: signal))
                    }
                    return uv_spawn(loop.raw, raw, &options)
                }
            }
        }
        if rc < 0 {
            // A failed uv_spawn has still initialised the handle, which must be closed.
            close()
            input.close()
            output.close()
            errors.close()
            throw UVError(rc)
        }
        pid = raw.pointee.pid
    }

    private func didExit(_ exit: ChildExit) {
        guard self.exit == nil else { return }
        self.exit = exit
        let callback = onExit
        onExit = nil
        callback?(exit)
    }

    /// Sends `signal` to the child's whole process group (it and what it started and left in
    /// the group); nothing once it has been reaped, as its pid may then be another's.
    @discardableResult
    public func signalGroup(_ signal: Int32) -> UVError? {
        guard exit == nil, pid > 0 else { return nil }
        let rc = uv_kill(-pid, signal)
        return rc < 0 ? UVError(rc) : nil
    }

    /// Closes the three pipes and the process handle. The process itself is not signalled:
    /// end it first (`signalGroup`) if it should not outlive its handle.
    public func closeAll(then: (() -> Void)? = nil) {
        input.close()
        output.close()
        errors.close()
        close(then: then)
    }

    override func didClose() { onExit = nil }
}
