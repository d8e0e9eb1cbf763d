import XCTest

import Posix
#if canImport(Glibc)
import Glibc
#endif

/// The file chores every module calls instead of the C library: what each leaves on disk.
final class FileSystemTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = try XCTUnwrap(String(validatingCString: mkdtemp(strdup("/tmp/confab-files-XXXXXX"))))
    }

    override func tearDown() {
        _ = Spawn.wait(["/bin/rm", "-rf", directory])
    }

    func testMakeDirectoriesMakesEachMissingOneWithItsModeAndKeepsWhatExists() throws {
        let path = directory + "/a/b/c"
        try Files.makeDirectories(path, mode: 0o700, parentMode: 0o755)
        XCTAssertEqual(try Files.status(path: path).kind, .directory)
        XCTAssertEqual(try Files.status(path: path).permissions & 0o777, 0o700)
        XCTAssertEqual(try Files.status(path: directory + "/a").permissions & 0o777, 0o755 & ~currentUmask())
        // Again: everything exists, nothing fails.
        try Files.makeDirectories(path)
    }

    func testMakeDirectoriesNamesTheComponentThatFailed() throws {
        let file = directory + "/file"
        try Files.writeAtomically(path: file, bytes: [1])
        XCTAssertThrowsError(try Files.makeDirectories(file + "/below")) { error in
            XCTAssertEqual((error as? PathError)?.path, file + "/below")
            XCTAssertEqual((error as? PathError)?.errno, Errno(ENOTDIR))
        }
    }

    func testAtomicWriteReplacesTheFileAndLeavesNoTemporaryFile() throws {
        let path = directory + "/settings"
        try Files.writeAtomically(path: path, bytes: Array("old".utf8))
        try Files.writeAtomically(path: path, bytes: Array("new".utf8), durable: true)
        XCTAssertEqual(try Files.readAll(path: path), Array("new".utf8))
        XCTAssertEqual(try Files.names(in: directory), ["settings"])
        XCTAssertEqual(try Files.status(path: path).permissions & 0o777, 0o600)
    }

    func testAFailedAtomicWriteLeavesTheOldFileAndNoTemporaryFile() throws {
        let path = directory + "/kept"
        try Files.writeAtomically(path: path, bytes: Array("old".utf8))
        // A temporary file in a directory that does not exist cannot be made.
        XCTAssertThrowsError(try Files.writeAtomically(path: path, bytes: [1], temporary: directory + "/none/tmp", durable: true)) { error in
            XCTAssertEqual((error as? PathError)?.path, self.directory + "/none/tmp")
        }
        // Renaming a file over a directory fails after the write: the temporary file goes.
        try Files.makeDirectories(directory + "/taken")
        XCTAssertThrowsError(try Files.writeAtomically(path: directory + "/taken", bytes: [1], temporary: directory + "/t.tmp"))
        XCTAssertEqual(try Files.readAll(path: path), Array("old".utf8))
        XCTAssertEqual(Set(try Files.names(in: directory)), ["kept", "taken"])
    }

    func testReadWholeIntoAReusedBufferHoldsExactlyTheFile() throws {
        try Files.writeAtomically(path: directory + "/long", bytes: [UInt8](repeating: 7, count: 100_000))
        try Files.writeAtomically(path: directory + "/short", bytes: Array("short".utf8))
        var buffer: [UInt8] = []
        try Files.readWhole(path: directory + "/long", into: &buffer)
        XCTAssertEqual(buffer, [UInt8](repeating: 7, count: 100_000))
        try Files.readWhole(path: directory + "/short", into: &buffer)
        XCTAssertEqual(buffer, Array("short".utf8))
        XCTAssertEqual(try Files.readWhole(path: directory + "/long").count, 100_000)
        XCTAssertThrowsError(try Files.readWhole(path: directory + "/missing", into: &buffer)) { error in
            XCTAssertEqual(error as? Errno, Errno(ENOENT))
        }
    }

    func testStatusesInADirectoryMatchEachFileAndMissNothingElse() throws {
        try Files.writeAtomically(path: directory + "/one", bytes: [1, 2, 3])
        let found = Files.statuses(of: ["one", "missing"], in: directory)
        XCTAssertEqual(found.count, 2)
        XCTAssertEqual(found[0]?.size, 3)
        XCTAssertEqual(found[0]?.inode, try Files.status(path: directory + "/one").inode)
        XCTAssertNil(found[1])
    }

    func testStatusWithoutFollowingLinksSeesTheLink() throws {
        try Files.writeAtomically(path: directory + "/target", bytes: [1])
        XCTAssertEqual(symlink(directory + "/target", directory + "/link"), 0)
        XCTAssertEqual(try Files.status(path: directory + "/link").kind, .regular)
        XCTAssertEqual(try Files.status(path: directory + "/link", followingLinks: false).kind, .symbolicLink)
        XCTAssertTrue(Files.sameFile(directory + "/link", directory + "/target"))
    }

    func testTruncateAndRemove() throws {
        let path = directory + "/cut"
        try Files.writeAtomically(path: path, bytes: Array("whole line\ntorn".utf8))
        let fd = try Files.open(path, O_RDWR)
        defer { Files.close(fd) }
        try Files.truncate(fd, to: 11)
        try Files.syncData(fd)
        XCTAssertEqual(try Files.readAll(path: path), Array("whole line\n".utf8))
        try Files.remove(path)
        XCTAssertThrowsError(try Files.remove(path)) { XCTAssertEqual($0 as? Errno, Errno(ENOENT)) }
    }

    private func currentUmask() -> mode_t {
        let mask = umask(0o022)
        umask(mask)
        return mask
    }
}
