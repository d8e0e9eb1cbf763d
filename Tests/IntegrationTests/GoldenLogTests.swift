import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Data directories written by earlier versions of confabd (`Tests/Fixtures/golden/<name>/`,
/// see the README there) must read, with today's daemon, to exactly the history committed
/// beside them (`<name>.expected.json`): every conversation as `conversation.get` gives it and
/// every message as `conversation.history` does. Once with the version's index, once from the
/// logs alone. `CONFAB_GOLDEN_RECORD=1` writes the expected files instead (review the diff).
final class GoldenLogTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    static let goldenDirectory: String = {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()  // Tests/IntegrationTests
        return here.deletingLastPathComponent().appendingPathComponent("Fixtures/golden").path
    }()

    /// The fixture directories, oldest first (their names start with a date).
    static func fixtures() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: goldenDirectory).filter { name in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: goldenDirectory + "/" + name, isDirectory: &isDirectory) && isDirectory.boolValue
        }.sorted()
    }

    func testEveryGoldenDataDirectoryReadsToItsCommittedHistory() throws {
        let names = try Self.fixtures()
        XCTAssertGreaterThanOrEqual(names.count, 3, "fixtures in \(Self.goldenDirectory)")
        harness = try Harness()
        let record = ProcessInfo.processInfo.environment["CONFAB_GOLDEN_RECORD"] == "1"
        for name in names {
            let expectedPath = Self.goldenDirectory + "/" + name + ".expected.json"
            for withIndex in [true, false] {
                try load(name, withIndex: withIndex)
                let history = try readEverything()
                if record && withIndex {
                    try Self.lines(history).write(toFile: expectedPath, atomically: true, encoding: .utf8)
                    continue
                }
                let expected = try JSON.parse(Array(try String(contentsOfFile: expectedPath, encoding: .utf8).utf8))
                let label = "\(name) \(withIndex ? "with its index" : "from the logs alone")"
                XCTAssertEqual(history, expected, label)
                if history != expected { Self.describeDifference(history, expected, label) }
            }
        }
    }

    /// A copied log has a new inode and mtime, so the fixture's own index vouches for none of
    /// them and the pass above reads every log. Here each entry of an index in today's format is
    /// made to describe the copy it lands beside (its inode and mtime, as a clean stop would have
    /// written them; the size must already match): start-up must then list every conversation from the index and read
    /// only the logs it marks as owing a reply, with the same history as from the logs.
    func testAnIndexThatDescribesItsLogsListsEveryConversationWithoutReadingOne() throws {
        harness = try Harness()
        let format = try todaysIndexFormat()
        var checked = 0
        for name in try Self.fixtures() {
            let source = Self.goldenDirectory + "/" + name + "/index.jsonl"
            let lines = try String(contentsOfFile: source, encoding: .utf8).split(separator: "\n").map(String.init)
            // Today's fields, or those before the last one (`model_default`), which today's daemon still reads.
            let todays = format["fields"]?.array ?? []
            guard let header = lines.first, let fields = try JSON.parse(Array(header.utf8))["fields"]?.array,
                  fields == todays || fields == Array(todays.dropLast()) else { continue }
            try copy(name, withIndex: false)
            var entries = 0, owing = 0
            var rewritten = [header]
            for line in lines.dropFirst() {
                guard case .array(var fields) = try JSON.parse(Array(line.utf8)), let id = fields.first?.string else {
                    return XCTFail("\(name): index line \(line)")
                }
                let identity = try XCTUnwrap(Self.identity(of: harness.dataDirectory + "/conversations/" + id + ".jsonl"), "\(name): \(id)")
                // The entry was written for these very bytes: only where they now lie changed.
                XCTAssertEqual(fields[1].int, identity.size, "\(name): \(id)'s entry was written for a log of another size")
                fields[2] = .int(identity.inode)
                fields[3] = .int(identity.mtimeNanoseconds)
                rewritten.append(JSON.array(fields).text)
                entries += 1
                if fields[10].bool == true { owing += 1 }
            }
            try (rewritten.joined(separator: "\n") + "\n").write(toFile: harness.dataDirectory + "/index.jsonl", atomically: false, encoding: .utf8)
            try harness.startDaemon()
            let history = try readEverything()
            let startLine = harness.log().split(separator: "\n").last { $0.contains("listed from the index") }
            XCTAssertTrue(startLine?.contains("\(entries - owing) conversations listed from the index, \(owing) logs read") ?? false,
                          "\(name): \(startLine ?? "no start-up line") (\(entries) entries, \(owing) owing a reply)")
            let expected = try JSON.parse(Array(try String(contentsOfFile: Self.goldenDirectory + "/" + name + ".expected.json", encoding: .utf8).utf8))
            XCTAssertEqual(history, expected, "\(name) listed from an index that describes its logs")
            if history != expected { Self.describeDifference(history, expected, name) }
            checked += 1
        }
        XCTAssertGreaterThanOrEqual(checked, 2, "fixtures whose index is in today's format")
    }

    /// The header line of the index today's daemon writes at a clean stop.
    private func todaysIndexFormat() throws -> JSON {
        let client = try harness.client()
        _ = try client.call("conversation.create", ["title": "format"])
        client.close()
        harness.stopDaemon()
        let index = try String(contentsOfFile: harness.dataDirectory + "/index.jsonl", encoding: .utf8)
        return try JSON.parse(Array(index.prefix { $0 != "\n" }.utf8))
    }

    /// What `stat(2)` says of a file, as the index records it.
    static func identity(of path: String) -> (size: Int, inode: Int, mtimeNanoseconds: Int)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (Int(info.st_size), Int(truncatingIfNeeded: info.st_ino), Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec))
    }

    /// Today's daemon on a copy of fixture `name` (its logs, and its index when `withIndex`).
    private func load(_ name: String, withIndex: Bool) throws {
        try copy(name, withIndex: withIndex)
        try harness.startDaemon()
    }

    /// A copy of fixture `name` as the data directory, no daemon running.
    private func copy(_ name: String, withIndex: Bool) throws {
        harness.stopDaemon()
        let files = FileManager.default
        try? files.removeItem(atPath: harness.dataDirectory)
        try files.createDirectory(atPath: harness.dataDirectory, withIntermediateDirectories: true)
        let source = Self.goldenDirectory + "/" + name
        try files.copyItem(atPath: source + "/conversations", toPath: harness.dataDirectory + "/conversations")
        if withIndex { try files.copyItem(atPath: source + "/index.jsonl", toPath: harness.dataDirectory + "/index.jsonl") }
        if files.fileExists(atPath: source + "/blobs") {
            try files.copyItem(atPath: source + "/blobs", toPath: harness.dataDirectory + "/blobs")
        }
    }

    /// `{"conversations":[{"conversation":…,"messages":[…]},…]}`, conversations by id.
    private func readEverything() throws -> JSON {
        let client = try harness.client()
        defer { client.close() }
        let listed = try XCTUnwrap(client.call("conversation.list", ["limit": 10000])["conversations"]?.array)
        var entries: [JSON] = []
        for id in listed.compactMap({ $0["id"]?.string }).sorted() {
            let conversation = try XCTUnwrap(client.call("conversation.get", ["conversation": .string(id)])["conversation"])
            let history = try client.call("conversation.history", ["conversation": .string(id), "limit": 1000])
            XCTAssertEqual(history["more"]?.bool, false)
            var entry: [String: JSON] = ["conversation": conversation, "messages": history["messages"] ?? .null]
            // The summary in force, where one is: what the model is sent in place of its range.
            if let compaction = history["compaction"] { entry["compaction"] = compaction }
            entries.append(.object(entry))
            for message in history["messages"]?.array ?? [] {
                for (index, attachment) in (message["attachments"]?.array ?? []).enumerated() {
                    try checkAttachment(attachment, of: message, index: index, conversation: id, client)
                }
            }
        }
        return ["conversations": .array(entries)]
    }

    /// Each file a stored message carries reads back whole, as the bytes of the blob its digest
    /// names, and those bytes have that digest (sha256sum's word, not the daemon's).
    private func checkAttachment(_ attachment: JSON, of message: JSON, index: Int, conversation: String, _ client: RPCClient) throws {
        let digest = try XCTUnwrap(attachment["sha256"]?.string)
        let label = "\(conversation)/\(message["id"]?.string ?? "?") file \(index)"
        var bytes: [UInt8] = []
        var more = true
        while more {
            let part = try client.call("attachment.get", ["conversation": .string(conversation), "message": message["id"] ?? .null,
                                                          "index": .int(index), "offset": .int(bytes.count)])
            bytes += try XCTUnwrap(Data(base64Encoded: part["data"]?.string ?? ""), label)
            more = part["more"]?.bool ?? false
        }
        XCTAssertEqual(bytes.count, attachment["size"]?.int, label)
        let blob = harness.dataDirectory + "/blobs/" + digest.prefix(2) + "/" + digest
        XCTAssertEqual(Data(bytes), FileManager.default.contents(atPath: blob), "\(label): not the bytes of blob \(digest)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.arguments = [blob]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let sum = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(sum.split(separator: " ").first.map(String.init), digest, label)
    }

    /// One conversation object or message a line, so that a change reads well in a diff.
    static func lines(_ history: JSON) -> String {
        let entries = history["conversations"]?.array ?? []
        let conversations = entries.map { entry in
            let messages = (entry["messages"]?.array ?? []).map { "    " + $0.text }.joined(separator: ",\n")
            let compaction = entry["compaction"].map { "   \"compaction\": \($0.text),\n" } ?? ""
            return "  {\"conversation\": \(entry["conversation"]?.text ?? "null"),\n\(compaction)   \"messages\": [\n\(messages)\n  ]}"
        }
        return "{\"conversations\": [\n" + conversations.joined(separator: ",\n") + "\n]}\n"
    }

    /// Names the first conversation and message that differ, which XCTAssertEqual's dump does not.
    static func describeDifference(_ actual: JSON, _ expected: JSON, _ label: String) {
        let got = actual["conversations"]?.array ?? [], want = expected["conversations"]?.array ?? []
        if got.count != want.count { print("\(label): \(got.count) conversations, expected \(want.count)") }
        for (a, e) in zip(got, want) where a != e {
            if a["conversation"] != e["conversation"] {
                print("\(label): conversation\n  got      \(a["conversation"]?.text ?? "")\n  expected \(e["conversation"]?.text ?? "")")
            }
            let am = a["messages"]?.array ?? [], em = e["messages"]?.array ?? []
            if am.count != em.count { print("\(label): \(am.count) messages, expected \(em.count)") }
            for (x, y) in zip(am, em) where x != y { print("\(label): message\n  got      \(x.text)\n  expected \(y.text)") }
        }
    }
}
