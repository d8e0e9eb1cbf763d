import ConfabProtocol
import Foundation
import XCTest

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

    /// Today's daemon on a copy of fixture `name` (its logs, and its index when `withIndex`).
    private func load(_ name: String, withIndex: Bool) throws {
        harness.stopDaemon()
        let files = FileManager.default
        try? files.removeItem(atPath: harness.dataDirectory)
        try files.createDirectory(atPath: harness.dataDirectory, withIntermediateDirectories: true)
        let source = Self.goldenDirectory + "/" + name
        try files.copyItem(atPath: source + "/conversations", toPath: harness.dataDirectory + "/conversations")
        if withIndex { try files.copyItem(atPath: source + "/index.jsonl", toPath: harness.dataDirectory + "/index.jsonl") }
        try harness.startDaemon()
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
            entries.append(["conversation": conversation, "messages": history["messages"] ?? .null])
        }
        return ["conversations": .array(entries)]
    }

    /// One conversation object or message a line, so that a change reads well in a diff.
    static func lines(_ history: JSON) -> String {
        let entries = history["conversations"]?.array ?? []
        let conversations = entries.map { entry in
            let messages = (entry["messages"]?.array ?? []).map { "    " + $0.text }.joined(separator: ",\n")
            return "  {\"conversation\": \(entry["conversation"]?.text ?? "null"),\n   \"messages\": [\n\(messages)\n  ]}"
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
