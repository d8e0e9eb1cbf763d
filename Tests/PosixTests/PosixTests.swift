import XCTest

import EventLoop
import Posix
#if canImport(Glibc)
import Glibc
#endif

final class FilesTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = try XCTUnwrap(String(validatingCString: mkdtemp(strdup("/tmp/confab-posix-XXXXXX"))))
    }

    override func tearDown() {
        for name in (try? Files.names(in: directory)) ?? [] { unlink(directory + "/" + name) }
        rmdir(directory)
    }

    private func write(_ name: String, _ bytes: [UInt8]) {
        let fd = open(directory + "/" + name, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }, bytes.count)
        close(fd)
    }

    func testReadsAWholeFileBiggerThanOneChunk() throws {
        let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        write("big", bytes)
        XCTAssertEqual(try Files.readAll(path: directory + "/big"), bytes)
    }

    func testDevNullAndAPipeReadToTheirEnd() throws {
        XCTAssertEqual(try Files.readAll(path: "/dev/null"), [])
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        let text = Array("through a pipe\n".utf8)
        XCTAssertEqual(text.withUnsafeBytes { Glibc.write(ends[1], $0.baseAddress, $0.count) }, text.count)
        close(ends[1])
        XCTAssertEqual(try Files.readAll(ends[0]), text)
        close(ends[0])
    }

    func testALimitStopsAnOversizedFileWithEFBIG() {
        write("key", Array(repeating: 0x61, count: 2000))
        XCTAssertEqual(try? Files.readAll(path: directory + "/key", limit: 2000).count, 2000)
        XCTAssertThrowsError(try Files.readAll(path: directory + "/key", limit: 1999)) { error in
            XCTAssertEqual(error as? Errno, Errno(EFBIG))
        }
    }

    func testAMissingFileSaysSo() {
        XCTAssertThrowsError(try Files.readAll(path: directory + "/absent")) { error in
            XCTAssertEqual(error as? Errno, Errno(ENOENT))
            XCTAssertEqual("\(error)", "No such file or directory")
        }
    }

    func testNamesListsEntriesWithoutDotAndDotDot() throws {
        write("a.jsonl", [])
        write("b", [1])
        XCTAssertEqual(try Files.names(in: directory).sorted(), ["a.jsonl", "b"])
        XCTAssertThrowsError(try Files.names(in: directory + "/absent")) { error in
            XCTAssertEqual(error as? Errno, Errno(ENOENT))
        }
    }
}

final class UnixSocketTests: XCTestCase {
    func testConnectRefusesPathsThatCannotBeSocketAddresses() {
        XCTAssertThrowsError(try UnixSocket.connect(to: "")) { XCTAssertEqual($0 as? Errno, Errno(ENOENT)) }
        let long = "/tmp/" + String(repeating: "x", count: UnixSocket.maxPathBytes)
        XCTAssertThrowsError(try UnixSocket.connect(to: long)) { XCTAssertEqual($0 as? Errno, Errno(ENAMETOOLONG)) }
        XCTAssertThrowsError(try UnixSocket.connect(to: "/tmp/a\u{0}b")) { XCTAssertEqual($0 as? Errno, Errno(ENAMETOOLONG)) }
        XCTAssertThrowsError(try UnixSocket.connect(to: "/nonexistent/confab.sock")) { XCTAssertEqual($0 as? Errno, Errno(ENOENT)) }
        XCTAssertFalse(UnixSocket.answers("/nonexistent/confab.sock"))
        XCTAssertFalse(UnixSocket.sendDatagram([1], to: "/nonexistent/notify"))
    }

    func testAListenerIsRecognisedAndAnswers() throws {
        let path = "/tmp/confab-posix-\(getpid()).sock"
        unlink(path)
        defer { unlink(path) }
        let loop = try Loop()
        let listener = try UnixListener(loop: loop)
        try listener.bind(path: path)
        let fd = try XCTUnwrap(listener.fileDescriptor)
        XCTAssertFalse(UnixSocket.isListeningStream(fd), "bound but not yet listening")
        try listener.listen { _ in }
        XCTAssertTrue(UnixSocket.isListeningStream(fd))
        XCTAssertEqual(UnixSocket.boundPath(of: fd), path)
        XCTAssertTrue(UnixSocket.answers(path))
        let client = try UnixSocket.connect(to: path)
        XCTAssertFalse(UnixSocket.isListeningStream(client), "a connected socket is not a listener")
        XCTAssertNil(UnixSocket.boundPath(of: client), "an unnamed client socket has no path")
        close(client)
        listener.close()
        _ = loop.runOnce(wait: false)
    }

    func testPeerCredentialsAreTheKernelsViewOfTheOtherEnd() throws {
        var pair: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair), 0)
        defer { close(pair[0]); close(pair[1]) }
        let peer = try UnixSocket.peerCredentials(of: pair[0])
        XCTAssertEqual(peer, UnixSocket.PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()))

        var pipeEnds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&pipeEnds), 0)
        defer { close(pipeEnds[0]); close(pipeEnds[1]) }
        XCTAssertThrowsError(try UnixSocket.peerCredentials(of: pipeEnds[0])) { error in
            XCTAssertEqual(error as? Errno, Errno(ENOTSOCK))
        }
    }

    func testKnownUidsHaveLoginsAndUnknownOnesDoNot() {
        XCTAssertEqual(UserAccount.login(of: 0), "root")
        XCTAssertNil(UserAccount.login(of: 4_000_000_000))
    }
}

final class OpenFileLimitTests: XCTestCase {
    func testRaisesTheSoftLimitToTheHardOneAndNoFurther() throws {
        var limit = rlimit()
        XCTAssertEqual(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit), 0)
        let saved = limit
        defer { var restore = saved; _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &restore) }
        let hard = min(UInt64(limit.rlim_max), 1 << 20)
        guard hard > 256 else { throw unavailable("hard limit \(hard) leaves nothing to raise") }
        limit.rlim_cur = 256
        XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit), 0)
        XCTAssertEqual(OpenFileLimit.current, 256)
        let raised = OpenFileLimit.raiseToHardLimit()
        XCTAssertEqual(raised.before, 256)
        XCTAssertEqual(raised.after, hard)
        XCTAssertEqual(OpenFileLimit.current, hard)
        XCTAssertEqual(OpenFileLimit.raiseToHardLimit().after, hard, "a second call changes nothing")
    }
}

final class LockFileTests: XCTestCase {
    func testOnlyOneHolderAtATimeAndTheLockEndsWithItsHolder() throws {
        let path = "/tmp/confab-posix-lock-\(getpid())"
        unlink(path)
        defer { unlink(path) }
        var first = try XCTUnwrap(try LockFile.acquire(path))
        XCTAssertNil(try LockFile.acquire(path), "a second open of the file cannot take the lock")
        var info = stat()
        XCTAssertEqual(stat(path, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        first = try XCTUnwrap(try LockFile.acquire(path + ".other"))
        unlink(path + ".other")
        XCTAssertNotNil(try LockFile.acquire(path), "released when its holder went away")
        _ = first
    }

    func testASymlinkIsNotFollowed() throws {
        let path = "/tmp/confab-posix-lock-link-\(getpid())"
        unlink(path)
        XCTAssertEqual(symlink("/tmp/confab-posix-lock-target-\(getpid())", path), 0)
        defer { unlink(path) }
        XCTAssertThrowsError(try LockFile.acquire(path)) { XCTAssertEqual($0 as? Errno, Errno(ELOOP)) }
    }
}

final class CrashReportSettingTests: XCTestCase {
    func testRegisterDumpsAreTurnedOffUnlessTheUserDecided() {
        XCTAssertEqual(CrashReport.saferSetting(nil), "registers=none")
        XCTAssertEqual(CrashReport.saferSetting(""), "registers=none")
        XCTAssertEqual(CrashReport.saferSetting("enable=yes,preset=full"), "enable=yes,preset=full,registers=none")
        XCTAssertNil(CrashReport.saferSetting("preset=full,registers=all"))
        XCTAssertNil(CrashReport.saferSetting("enable=yes, registers=none"))
        XCTAssertEqual(CrashReport.saferSetting("enable=no"), "enable=no,registers=none")
    }
}

/// /etc/passwd read as a file, for the static client (no NSS modules).
final class PasswdFileTests: XCTestCase {
    func testEntriesAreReadAndOddLinesSkipped() {
        let text = """
            root:x:0:0:root:/root:/bin/bash
            # a comment:x:5:5
            +nisuser::::::
            broken line
            nouid:x:abc:1::/:/bin/sh
            alice:x:1000:1000:Alice,,,:/home/alice:/usr/bin/zsh

            """
        let entries = PasswdFile.entries(in: Array(text.utf8))
        XCTAssertEqual(entries.map(\.login), ["root", "alice"])
        XCTAssertEqual(entries.map(\.uid), [0, 1000])
        XCTAssertEqual(entries.map(\.home), ["/root", "/home/alice"])
        XCTAssertEqual(PasswdFile.entries(in: Array("x:x:7:7::relative:/bin/sh\ny:x:8:8\n".utf8)).map(\.home), [nil, nil])
    }

    func testLookupsInAFile() throws {
        let path = "/tmp/confab-passwd-test-\(getpid())"
        try Files.writeAtomically(path: path, bytes: Array("root:x:0:0::/root:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\n".utf8))
        defer { unlink(path) }
        XCTAssertEqual(PasswdFile.login(of: 1001, path: path), "bob")
        XCTAssertNil(PasswdFile.login(of: 4242, path: path))
        XCTAssertEqual(PasswdFile.uid(of: "root", path: path), 0)
        XCTAssertNil(PasswdFile.uid(of: "carol", path: path))
        XCTAssertNil(PasswdFile.login(of: 0, path: path + ".missing"))
        XCTAssertEqual(PasswdFile.homeDirectory(of: 1001, path: path), "/home/bob")
        XCTAssertNil(PasswdFile.homeDirectory(of: 4242, path: path))
    }
}

final class ThisProcessTests: XCTestCase {
    func testTheProcessAndItsKernel() {
        XCTAssertEqual(ThisProcess.id, getpid())
        XCTAssertEqual(ThisProcess.kernelName(), "Linux")
    }

    /// A pipe is no terminal: it has no path, and throwing away its typed input leaves what
    /// is in it (only a terminal has typed input).
    func testAPipeIsNoTerminal() throws {
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        defer { close(ends[0]); close(ends[1]) }
        XCTAssertNil(TerminalDevice.path(of: ends[0]))
        XCTAssertEqual(write(ends[1], "x", 1), 1)
        TerminalDevice.discardTypedInput(ends[0])
        var byte: UInt8 = 0
        XCTAssertEqual(read(ends[0], &byte, 1), 1)
        XCTAssertEqual(byte, UInt8(ascii: "x"))
    }
}
