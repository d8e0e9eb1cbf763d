import Foundation
import XCTest

import ConfabProtocol
import EventLoop
@testable import LogStore
#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under the system temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() throws {
        var base = NSTemporaryDirectory()
        if base.hasSuffix("/") { base.removeLast() }
        path = base + "/confab-logstore-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

enum Files {
    static func bytes(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { [UInt8]($0) }
    }

    static func lines(_ path: String) -> [[UInt8]] {
        guard let bytes = bytes(path) else { return [] }
        return bytes.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map(Array.init)
    }

    static func size(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int(info.st_size)
    }

    static func permissions(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o777
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Appends raw bytes the way a crash or another writer might leave them.
    static func append(_ path: String, _ bytes: [UInt8]) {
        let fd = open(path, O_WRONLY | O_APPEND)
        precondition(fd >= 0, "open \(path)")
        defer { close(fd) }
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        precondition(n == bytes.count)
    }

    static func append(_ path: String, _ text: String) { append(path, Array(text.utf8)) }

    static func record(_ record: LogRecord, at time: Timestamp = Fixture.at(50_000)) -> [UInt8] {
        record.json(at: time).bytes + [0x0A]
    }
}

final class LogStoreTests: XCTestCase {

    // MARK: - Helpers

    private func makeStore(_ directory: String, loop: Loop, syncEnabled: Bool = true,
                           file: StaticString = #filePath, line: UInt = #line) throws -> LogStore {
        do {
            return try LogStore(directory: directory + "/data", loop: loop, syncEnabled: syncEnabled)
        } catch {
            XCTFail("LogStore init: \(error)", file: file, line: line)
            throw error
        }
    }

    private func create(_ store: LogStore, _ loop: Loop, _ header: ConversationHeader = Fixture.header(),
                        file: StaticString = #filePath, line: UInt = #line) throws -> ConversationLog {
        var result: Result<ConversationLog, StoreError>?
        var calls = 0
        store.create(header) { outcome in
            calls += 1
            result = outcome
        }
        loop.run()
        XCTAssertEqual(calls, 1, "create's done runs exactly once", file: file, line: line)
        return try XCTUnwrap(result, file: file, line: line).get()
    }

    /// Appends durably and runs the loop until the callback came.
    private func appendDurably(_ log: ConversationLog, _ loop: Loop, _ records: [LogRecord],
                               file: StaticString = #filePath, line: UInt = #line) {
        var calls = 0
        var failure: StoreError?
        log.append(records) { error in
            calls += 1
            failure = error
        }
        loop.run()
        XCTAssertEqual(calls, 1, "durable callback runs exactly once", file: file, line: line)
        XCTAssertNil(failure, "append failed", file: file, line: line)
    }

    private func reload(_ directory: String, _ loop: Loop) throws -> (loaded: [LogStore.Loaded], problems: [LoadProblem]) {
        let store = try makeStore(directory, loop: loop)
        return store.loadAll()
    }

    private func closeAll(_ loaded: [LogStore.Loaded]) {
        for item in loaded { item.log.close() }
    }

    private var conversation: [LogRecord] {
        [
            .message(Fixture.user(1, "hello")),
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyText(message: "m2", content: "Hi"),
            .replyText(message: "m2", content: " there"),
            .replyFinished(Fixture.reply(2, "Hi there", status: .complete)),
            .title("renamed"),
            .message(Fixture.user(3, "more\nlines \"quoted\" é🎉")),
        ]
    }

    private var conversationMessages: [Message] {
        [Fixture.user(1, "hello"), Fixture.reply(2, "Hi there", status: .complete), Fixture.user(3, "more\nlines \"quoted\" é🎉")]
    }

    // MARK: - Create

    func testCreateWritesHeaderWithPrivatePermissions() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        XCTAssertEqual(store.conversationsDirectory, dir.path + "/data/conversations")
        XCTAssertEqual(Files.permissions(store.conversationsDirectory), 0o700)
        XCTAssertEqual(Files.permissions(dir.path + "/data"), 0o700)

        let header = Fixture.header()
        let log = try create(store, loop, header)
        defer { log.close() }
        let path = store.conversationsDirectory + "/" + header.id + ".jsonl"
        XCTAssertEqual(log.path, path)
        XCTAssertEqual(log.id, header.id)
        XCTAssertTrue(Files.exists(path))
        XCTAssertEqual(Files.permissions(path), 0o600)

        let bytes = try XCTUnwrap(Files.bytes(path))
        XCTAssertEqual(bytes.last, 0x0A, "ends in a newline")
        let lines = Files.lines(path)
        XCTAssertEqual(lines.count, 1, "just the header")
        let json = try JSON.parse(try XCTUnwrap(lines.first))
        XCTAssertEqual(LogRecord(json: json), .header(header))
        XCTAssertEqual(json["type"], "conversation")
        XCTAssertEqual(json["v"], 1)
        XCTAssertEqual(json["at"], .string(header.created.description))
    }

    func testCreateRefusesAnExistingConversation() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        defer { log.close() }
        let before = Files.bytes(log.path)

        var result: Result<ConversationLog, StoreError>?
        store.create(Fixture.header(title: "other")) { result = $0 }
        loop.run()
        guard case .failure(let error)? = result else { return XCTFail("second create succeeded: \(String(describing: result))") }
        XCTAssertEqual(error.errno, EEXIST)
        XCTAssertEqual(Files.bytes(log.path), before, "the existing log is untouched")
    }

    func testStoreInitOnExistingDirectoryIsFine() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        _ = try makeStore(dir.path, loop: loop)
        _ = try makeStore(dir.path, loop: loop)
        XCTAssertTrue(Files.exists(dir.path + "/data/conversations"))
    }

    func testStoreInitFailsWhenAPathComponentIsAFile() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        XCTAssertTrue(FileManager.default.createFile(atPath: dir.path + "/data", contents: Data("x".utf8)))
        let loop = try Loop()
        XCTAssertThrowsError(try LogStore(directory: dir.path + "/data", loop: loop)) { error in
            XCTAssertEqual((error as? StoreError)?.errno, ENOTDIR)
        }
    }

    // MARK: - Append and reload

    func testAppendThenReloadGivesTheSameConversation() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let header = Fixture.header()
        let log = try create(store, loop, header)
        for record in conversation { appendDurably(log, loop, [record]) }
        XCTAssertEqual(Files.lines(log.path).count, 1 + conversation.count, "one line per record")
        log.close()

        let (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        XCTAssertEqual(loaded.count, 1)
        let replayed = try XCTUnwrap(loaded.first).conversation
        XCTAssertEqual(replayed.header, header)
        XCTAssertEqual(replayed.title, "renamed")
        XCTAssertEqual(replayed.messages, conversationMessages)
        XCTAssertEqual(replayed.interruptedReplies, [])
        XCTAssertGreaterThanOrEqual(replayed.updated, header.created)
    }

    func testSeveralRecordsInOneAppend() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        appendDurably(log, loop, conversation)
        log.close()
        let (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        XCTAssertEqual(loaded.first?.conversation.messages, conversationMessages)
    }

    func testReloadedLogKeepsAppending() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        appendDurably(log, loop, [.message(Fixture.user(1, "one"))])
        log.close()

        var (loaded, problems) = try reload(dir.path, loop)
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        let reopened = try XCTUnwrap(loaded.first).log
        appendDurably(reopened, loop, [.message(Fixture.user(2, "two"))])
        reopened.close()

        (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        XCTAssertEqual(loaded.first?.conversation.messages, [Fixture.user(1, "one"), Fixture.user(2, "two")])
    }

    func testSeveralConversationsLoadSortedById() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let ids = (0..<5).map { _ in ConversationID.make() }
        for id in ids {
            let log = try create(store, loop, Fixture.header(id: id, title: "t-\(id)"))
            appendDurably(log, loop, [.message(Fixture.user(1, "in \(id)", conversation: id))])
            log.close()
        }
        let (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        XCTAssertEqual(loaded.map(\.conversation.header.id), ids.sorted())
        XCTAssertEqual(loaded.map(\.log.id), ids.sorted())
        for item in loaded {
            XCTAssertEqual(item.conversation.title, "t-\(item.conversation.header.id)")
            XCTAssertEqual(item.conversation.messages.map(\.content), ["in \(item.conversation.header.id)"])
        }
    }

    func testEmptyStoreLoadsNothing() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let (loaded, problems) = try reload(dir.path, loop)
        XCTAssertTrue(loaded.isEmpty)
        XCTAssertTrue(problems.isEmpty, "\(problems)")
    }

    // MARK: - Damage

    func testTornLastLineIsReportedDroppedAndCutOff() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        let path = log.path
        appendDurably(log, loop, [.message(Fixture.user(1, "kept"))])
        log.close()
        let goodBytes = try XCTUnwrap(Files.bytes(path))

        // A crash mid-append: half a record, no newline.
        let full = Files.record(.message(Fixture.user(2, "torn")))
        Files.append(path, Array(full.prefix(full.count / 2)))
        XCTAssertNotEqual(Files.bytes(path), goodBytes)

        var (loaded, problems) = try reload(dir.path, loop)
        XCTAssertEqual(problems.count, 1, "\(problems)")
        let problem = try XCTUnwrap(problems.first)
        XCTAssertEqual(problem.file, path)
        XCTAssertEqual(problem.line, 3, "header, one message, then the torn line")
        XCTAssertTrue(problem.message.contains("torn"), problem.message)
        XCTAssertEqual(loaded.first?.conversation.messages, [Fixture.user(1, "kept")])
        XCTAssertEqual(Files.bytes(path), goodBytes, "cut back to the last newline")

        // The next append starts on a clean line and everything reloads.
        let reopened = try XCTUnwrap(loaded.first).log
        appendDurably(reopened, loop, [.message(Fixture.user(2, "after"))])
        reopened.close()
        (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        XCTAssertEqual(loaded.first?.conversation.messages, [Fixture.user(1, "kept"), Fixture.user(2, "after")])
    }

    func testTornLineOfGarbageIsCutOff() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        let path = log.path
        log.close()
        let goodSize = try XCTUnwrap(Files.size(path))
        Files.append(path, [0xFF, 0x00, 0x7B])
        let (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertEqual(problems.map(\.line), [2])
        XCTAssertEqual(loaded.count, 1)
        XCTAssertEqual(Files.size(path), goodSize)
    }

    func testUnreadableLinesInTheMiddleAreSkippedAndReported() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        let path = log.path
        appendDurably(log, loop, [.message(Fixture.user(1, "before"))])
        log.close()
        Files.append(path, "this is not json\n")                                        // line 3
        Files.append(path, Files.record(.message(Fixture.user(2, "between"))))           // line 4
        Files.append(path, #"{"type":"from.the.future","v":1,"at":"2026-11-22T04:15:30.123Z"}"# + "\n") // line 5
        Files.append(path, #"{"type":"title","v":2,"title":"newer format"}"# + "\n")  // line 6
        Files.append(path, [0x7B, 0xC3, 0x28, 0x7D, 0x0A])                               // line 7: invalid UTF-8
        Files.append(path, Files.record(.message(Fixture.user(3, "after"))))             // line 8
        let sizeBefore = Files.size(path)

        let (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertEqual(problems.map(\.line), [3, 5, 6, 7], "\(problems)")
        XCTAssertTrue(problems.allSatisfy { $0.file == path })
        XCTAssertTrue(problems.allSatisfy { !$0.message.contains("torn") }, "\(problems)")
        XCTAssertEqual(loaded.first?.conversation.messages.map(\.content), ["before", "between", "after"])
        XCTAssertEqual(loaded.first?.conversation.title, "demo", "the unreadable title record did not apply")
        XCTAssertEqual(Files.size(path), sizeBefore, "whole lines are never cut")
    }

    func testBadFileNamesAreIgnoredAndReported() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        log.close()
        let logBytes = Files.bytes(log.path)
        let header = Files.bytes(log.path) ?? []
        for name in ["BAD.jsonl", "abc.jsonl", "K3V9Q2M8X7AD.jsonl", "k3v9q2m8x7adx.jsonl", ".jsonl"] {
            XCTAssertTrue(FileManager.default.createFile(atPath: store.conversationsDirectory + "/" + name,
                                                         contents: Data(header)), name)
        }
        XCTAssertTrue(FileManager.default.createFile(atPath: store.conversationsDirectory + "/notes.txt", contents: Data()))

        let (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertEqual(loaded.map(\.conversation.header.id), [Fixture.conversation], "only the real log loads")
        XCTAssertEqual(Set(problems.map(\.file)),
                       ["BAD.jsonl", "abc.jsonl", "K3V9Q2M8X7AD.jsonl", "k3v9q2m8x7adx.jsonl", ".jsonl"], "\(problems)")
        XCTAssertTrue(problems.allSatisfy { $0.line == nil })
        XCTAssertTrue(Files.exists(store.conversationsDirectory + "/BAD.jsonl"), "ignored, not deleted")
        XCTAssertEqual(Files.bytes(log.path), logBytes)
    }

    func testEmptyLogLeftByACrashAtCreationIsRemoved() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let path = store.conversationsDirectory + "/k3v9q2m8x7ad.jsonl"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data()))
        let (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertTrue(loaded.isEmpty)
        XCTAssertEqual(problems.count, 1)
        XCTAssertTrue(problems.first?.message.contains("empty log") == true, "\(problems)")
        XCTAssertFalse(Files.exists(path), "removed, so it is not reported at every start")
    }

    func testLogHoldingOnlyATornHeaderIsRemoved() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let path = store.conversationsDirectory + "/k3v9q2m8x7ad.jsonl"
        let header = Files.record(.header(Fixture.header()))
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(header.prefix(header.count / 2))))
        let (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertTrue(loaded.isEmpty)
        XCTAssertTrue(problems.contains { $0.message.contains("no whole record") }, "\(problems)")
        XCTAssertFalse(Files.exists(path), "removed, so it is not reported at every start")
    }

    func testLogWhoseHeaderNamesAnotherIdIsIgnored() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let other = "000000000000"
        let path = store.conversationsDirectory + "/" + other + ".jsonl"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(Files.record(.header(Fixture.header())))))
        let noHeader = store.conversationsDirectory + "/111111111111.jsonl"
        XCTAssertTrue(FileManager.default.createFile(atPath: noHeader,
                                                     contents: Data(Files.record(.message(Fixture.user(1, "x"))))))
        let (loaded, problems) = try reload(dir.path, loop)
        closeAll(loaded)
        XCTAssertTrue(loaded.isEmpty)
        XCTAssertEqual(Set(problems.map(\.file)), [path, noHeader], "\(problems)")
    }

    // MARK: - Interrupted replies

    func testUnfinishedReplyLoadsInterruptedAndIsFinishedOnDisk() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        let path = log.path
        appendDurably(log, loop, [.message(Fixture.user(1, "hi"))])
        appendDurably(log, loop, [.replyStarted(Fixture.reply(2, "", status: .streaming))])
        try log.write([.replyText(message: "m2", content: "Hello, ")])
        try log.write([.replyText(message: "m2", content: "wor")])
        log.close()   // the daemon dies here
        let linesBefore = Files.lines(path).count

        var (loaded, problems) = try reload(dir.path, loop)
        closeAll(loaded)
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        let first = try XCTUnwrap(loaded.first).conversation
        var expected = Fixture.reply(2, "Hello, wor", status: .interrupted)
        expected.usage = Usage.estimate(prompt: ["You are terse.", "hi"], completion: "Hello, wor")
        XCTAssertEqual(first.messages, [Fixture.user(1, "hi"), expected])
        XCTAssertEqual(first.interruptedReplies, [], "already recorded")

        let lines = Files.lines(path)
        XCTAssertEqual(lines.count, linesBefore + 1, "a reply.finished record was appended")
        let last = LogRecord(json: try JSON.parse(try XCTUnwrap(lines.last)))
        XCTAssertEqual(last, .replyFinished(expected))
        let sizeAfterFirst = Files.size(path)

        (loaded, problems) = try reload(dir.path, loop)
        closeAll(loaded)
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        XCTAssertEqual(loaded.first?.conversation.messages, first.messages, "a second reload is stable")
        XCTAssertEqual(Files.size(path), sizeAfterFirst, "nothing more written")
    }

    // MARK: - Delete

    func testDeleteRemovesTheFile() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        appendDurably(log, loop, [.message(Fixture.user(1, "x"))])
        XCTAssertTrue(Files.exists(log.path))

        var calls = 0
        var failure: StoreError?
        store.delete(log) { error in
            calls += 1
            failure = error
        }
        loop.run()
        XCTAssertEqual(calls, 1)
        XCTAssertNil(failure)
        XCTAssertFalse(Files.exists(log.path))
        XCTAssertThrowsError(try log.write([.title("after delete")]), "a deleted log is closed")

        let (loaded, problems) = try reload(dir.path, loop)
        XCTAssertTrue(loaded.isEmpty)
        XCTAssertTrue(problems.isEmpty, "\(problems)")
    }

    // MARK: - Durability

    func testGroupCommitRunsEveryCallbackOnceInOrder() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        defer { log.close() }
        let count = 200
        var order: [Int] = []
        var errors: [StoreError] = []
        appendDurably(log, loop, [.replyStarted(Fixture.reply(1, "", status: .streaming))])
        for index in 0..<count {
            log.append([.replyText(message: "m1", content: "\(index),")]) { error in
                order.append(index)
                if let error { errors.append(error) }
            }
        }
        loop.run()
        XCTAssertEqual(order, Array(0..<count), "each callback once, in append order")
        XCTAssertEqual(errors, [])
        XCTAssertEqual(Files.lines(log.path).count, 2 + count)
    }

    func testCallbacksQueuedWhileASyncIsInFlightAllRun() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        defer { log.close() }
        // Appends made from inside a durable callback join the next sync.
        var order: [String] = []
        log.append([.title("a")]) { _ in
            order.append("a")
            log.append([.title("c")]) { _ in order.append("c") }
        }
        log.append([.title("b")]) { _ in order.append("b") }
        log.sync { _ in order.append("sync") }
        loop.run()
        XCTAssertEqual(order, ["a", "b", "sync", "c"])
    }

    func testCloseWhileSyncInFlightStillCallsBack() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        var results: [StoreError?] = []
        log.append([.title("x")]) { results.append($0) }
        log.close()
        loop.run()
        XCTAssertEqual(results.count, 1)
        XCTAssertNil(results.first ?? nil)
        XCTAssertThrowsError(try log.write([.title("y")])) { error in
            XCTAssertEqual((error as? StoreError)?.errno, EBADF)
        }
        var late: [StoreError?] = []
        log.append([.title("z")]) { late.append($0) }
        loop.run()
        XCTAssertEqual(late.count, 1)
        XCTAssertEqual(late.first??.errno, EBADF)
    }

    func testSyncNowSucceeds() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        defer { log.close() }
        try log.write([.title("x")])
        XCTAssertNil(log.syncNow())
    }

    func testWithoutSyncCallbacksStillRun() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop, syncEnabled: false)
        let log = try create(store, loop)

        var appended: [StoreError?] = []
        for index in 0..<5 {
            log.append([.message(Fixture.user(index + 1, "n\(index)"))]) { appended.append($0) }
        }
        var synced = 0
        log.sync { error in
            XCTAssertNil(error)
            synced += 1
        }
        loop.run()
        XCTAssertEqual(appended.count, 5)
        XCTAssertTrue(appended.allSatisfy { $0 == nil })
        XCTAssertEqual(synced, 1)
        XCTAssertNil(log.syncNow())
        log.close()

        let (loaded, problems) = try reload(dir.path, loop)
        closeAll(loaded)
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        XCTAssertEqual(loaded.first?.conversation.messages.count, 5)

        var deleted = 0
        store.delete(log) { error in
            XCTAssertNil(error)
            deleted += 1
        }
        loop.run()
        XCTAssertEqual(deleted, 1)
        XCTAssertFalse(Files.exists(log.path))
    }

    // MARK: - Write failure

    /// Runs `body` with the file size limit set to `limit` bytes and SIGXFSZ ignored, so
    /// writes past it fail with EFBIG. Nothing is asserted inside: output may go to a file.
    private func withFileSizeLimit<T>(_ limit: Int, _ body: () throws -> T) throws -> T {
        let resource = __rlimit_resource_t(RLIMIT_FSIZE.rawValue)
        var saved = rlimit()
        guard getrlimit(resource, &saved) == 0 else { throw StoreError(errno: errno, operation: "getrlimit") }
        let previousHandler = signal(SIGXFSZ, SIG_IGN)
        defer { signal(SIGXFSZ, previousHandler) }
        var small = saved
        small.rlim_cur = rlim_t(limit)
        guard setrlimit(resource, &small) == 0 else { throw StoreError(errno: errno, operation: "setrlimit") }
        defer {
            let rc = setrlimit(resource, &saved)
            precondition(rc == 0, "could not restore RLIMIT_FSIZE")
        }
        return try body()
    }

    func testFailedWriteLeavesTheFileUnchanged() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        appendDurably(log, loop, [.message(Fixture.user(1, "fits"))])
        let path = log.path
        let before = try XCTUnwrap(Files.bytes(path))
        let big = LogRecord.message(Fixture.user(2, String(repeating: "x", count: 4096)))

        // The record crosses the limit: part of it is written before EFBIG.
        let (writeError, reportedAtOnce, appendErrors) = try withFileSizeLimit(before.count + 100) { () -> (Error?, Int, [StoreError?]) in
            var writeError: Error?
            do { try log.write([big]) } catch { writeError = error }
            var appendErrors: [StoreError?] = []
            log.append([big]) { appendErrors.append($0) }
            // Even a failure known at once is reported on a later loop turn, never re-entrantly.
            let reportedAtOnce = appendErrors.count
            while appendErrors.isEmpty { loop.runOnce(wait: true) }
            return (writeError, reportedAtOnce, appendErrors)
        }
        XCTAssertEqual((writeError as? StoreError)?.errno, EFBIG, "\(String(describing: writeError))")
        XCTAssertEqual(reportedAtOnce, 0, "append reports its failure on a later turn")
        XCTAssertEqual(appendErrors.count, 1)
        XCTAssertEqual(appendErrors.first??.errno, EFBIG)
        XCTAssertEqual(Files.size(path), before.count, "the partial record was cut off")
        XCTAssertEqual(Files.bytes(path), before)

        // With room again, appends work and the log reads cleanly.
        appendDurably(log, loop, [.message(Fixture.user(2, "after"))])
        log.close()
        let (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        XCTAssertEqual(loaded.first?.conversation.messages, [Fixture.user(1, "fits"), Fixture.user(2, "after")])
    }

    func testWriteAtTheLimitFailsWithoutWritingAnything() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        defer { log.close() }
        let before = try XCTUnwrap(Files.bytes(log.path))
        let writeError = try withFileSizeLimit(before.count) { () -> Error? in
            do { try log.write([.title("no room")]) } catch { return error }
            return nil
        }
        XCTAssertEqual((writeError as? StoreError)?.errno, EFBIG)
        XCTAssertEqual(Files.bytes(log.path), before)
        try log.write([.title("room")])
        XCTAssertEqual(Files.lines(log.path).count, 2)
    }

    func testFailedMultiRecordWriteStoresNoneOfThem() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let loop = try Loop()
        let store = try makeStore(dir.path, loop: loop)
        let log = try create(store, loop)
        let before = try XCTUnwrap(Files.bytes(log.path))
        let records: [LogRecord] = [.title("small"), .message(Fixture.user(1, String(repeating: "y", count: 2000)))]
        let writeError = try withFileSizeLimit(before.count + 200) { () -> Error? in
            do { try log.write(records) } catch { return error }
            return nil
        }
        XCTAssertEqual((writeError as? StoreError)?.errno, EFBIG)
        XCTAssertEqual(Files.bytes(log.path), before, "all or nothing")
        log.close()
        let (loaded, problems) = try reload(dir.path, loop)
        defer { closeAll(loaded) }
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        XCTAssertEqual(loaded.first?.conversation.title, "demo")
    }
}
