import EventLoop
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `ChildProcess`: a program on the loop with its standard streams as pipes.
final class ChildProcessTests: XCTestCase {
    private let environment = ["PATH": "/usr/bin:/bin"]

    /// Runs `loop` until `done` holds, for at most 20 seconds (a guard, not a timing).
    private func run(_ loop: Loop, until done: () -> Bool) {
        let deadline = Date().addingTimeInterval(20)
        while !done(), Date() < deadline { _ = loop.runOnce(wait: false); usleep(1000) }
    }

    private func collect(_ stream: UnixStream, into text: UnsafeMutablePointer<String>, ended: UnsafeMutablePointer<Bool>) {
        stream.startReading { event in
            switch event {
            case .data(let bytes): text.pointee += String(decoding: bytes, as: UTF8.self)
            case .endOfFile, .failed: ended.pointee = true
            }
        }
    }

    func testCatEchoesItsInputAndExitsWhenInputCloses() throws {
        let loop = try Loop()
        var exit: ChildExit?
        let child = try ChildProcess(loop: loop, command: ChildCommand(program: "cat", environment: environment)) { exit = $0 }
        XCTAssertGreaterThan(child.pid, 0)
        var output = "", ended = false
        collect(child.output, into: &output, ended: &ended)
        child.input.write(OutboundBuffer(Array("one line\n".utf8)))
        run(loop) { output == "one line\n" }
        XCTAssertEqual(output, "one line\n")
        XCTAssertNil(exit, "cat waits for more input")
        child.input.shutdown {}
        run(loop) { exit != nil && ended }
        XCTAssertEqual(exit, ChildExit(status: 0, signal: 0))
        child.closeAll()
        loop.close()
    }

    func testStandardErrorArgumentsEnvironmentAndDirectoryReachTheChild() throws {
        let loop = try Loop()
        var exit: ChildExit?
        let command = ChildCommand(program: "sh", arguments: ["-c", "echo \"$1 $GREETING $(pwd)\" >&2; exit 3", "sh", "argument"],
                                   environment: environment.merging(["GREETING": "hello"]) { $1 }, workingDirectory: "/tmp")
        let child = try ChildProcess(loop: loop, command: command) { exit = $0 }
        var errors = "", ended = false
        collect(child.errors, into: &errors, ended: &ended)
        run(loop) { exit != nil && ended }
        XCTAssertEqual(errors, "argument hello /tmp\n")
        XCTAssertEqual(exit, ChildExit(status: 3, signal: 0))
        child.closeAll()
        loop.close()
    }

    func testOnlyTheGivenEnvironmentIsPassed() throws {
        let loop = try Loop()
        setenv("CONFAB_CHILD_TEST_SECRET", "leaked", 1)
        defer { unsetenv("CONFAB_CHILD_TEST_SECRET") }
        var exit: ChildExit?
        let child = try ChildProcess(loop: loop, command: ChildCommand(program: "sh", arguments: ["-c", "echo \"[${CONFAB_CHILD_TEST_SECRET:-}]\""], environment: environment)) { exit = $0 }
        var output = "", ended = false
        collect(child.output, into: &output, ended: &ended)
        run(loop) { exit != nil && ended }
        XCTAssertEqual(output, "[]\n")
        child.closeAll()
        loop.close()
    }

    func testAProgramThatDoesNotExistThrows() throws {
        let loop = try Loop()
        XCTAssertThrowsError(try ChildProcess(loop: loop, command: ChildCommand(program: "confab-no-such-program", environment: environment)) { _ in })
        loop.close()
    }

    /// The group signal reaches the child's own children too: `sh` starts a `sleep` and prints
    /// its pid; after SIGKILL to the group neither is left.
    func testSignallingTheGroupEndsTheChildAndWhatItStarted() throws {
        let loop = try Loop()
        var exit: ChildExit?
        let child = try ChildProcess(loop: loop, command: ChildCommand(program: "sh", arguments: ["-c", "sleep 300 & echo $!; wait"], environment: environment)) { exit = $0 }
        var output = "", ended = false
        collect(child.output, into: &output, ended: &ended)
        run(loop) { output.hasSuffix("\n") }
        let grandchild = try XCTUnwrap(Int32(output.trimmingCharacters(in: .whitespacesAndNewlines)))
        XCTAssertEqual(kill(grandchild, 0), 0, "the sleep runs")
        XCTAssertEqual(getpgid(grandchild), child.pid, "the sleep is in the child's group")
        XCTAssertNil(child.signalGroup(SIGKILL))
        run(loop) { exit != nil }
        XCTAssertEqual(exit?.signal, SIGKILL)
        // The sleep was ours only through sh; once killed it is reaped by init: wait for that.
        let deadline = Date().addingTimeInterval(20)
        while kill(grandchild, 0) == 0, Date() < deadline { usleep(10_000) }
        XCTAssertNotEqual(kill(grandchild, 0), 0, "the sleep was ended with its group")
        child.closeAll()
        loop.close()
    }
}
