import XCTest

import ConfabProtocol
@testable import LogStore

/// Records as they are on disk, written out by hand (taken from logs an earlier daemon wrote,
/// see Tests/Fixtures/golden): each must read to a record and write back to exactly the same
/// JSON. A round trip through today's code alone would not notice a key renamed on both ends;
/// these lines would.
final class LogRecordLiteralTests: XCTestCase {
    static let lines = [
        #"{"at":"2026-11-25T20:45:34.938Z","created":"2026-11-25T20:45:34.938Z","id":"449ypgq72d82","model":"fake-model","provider":"default","title":"crash","type":"conversation","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.850Z","message":{"content":"Hello, I am your guide.","conversation":"m5f72bb5nvx2","created":"2026-11-25T20:45:34.850Z","id":"m1","role":"assistant","status":"complete"},"type":"message","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.851Z","message":{"author":{"client_id":"c1","login":"root","name":"golden","uid":0},"content":"yes","conversation":"m5f72bb5nvx2","created":"2026-11-25T20:45:34.851Z","id":"m3","role":"user","status":"complete"},"type":"message","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.940Z","message":{"content":"","conversation":"449ypgq72d82","created":"2026-11-25T20:45:34.940Z","id":"m2","model":"fake-model","role":"assistant","status":"streaming"},"type":"reply.started","v":1}"#,
        #"{"at":"2026-11-25T20:45:35.242Z","content":"w1 w2 w3 w4 ","message":"m2","type":"reply.text","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.659Z","message":{"content":"Hello there.","conversation":"adcx77jgvs63","created":"2026-11-25T20:45:34.651Z","finish_reason":"stop","id":"m2","model":"fake-model","role":"assistant","status":"complete","usage":{"completion_tokens":4,"prompt_tokens":5,"total_tokens":9}},"type":"reply.finished","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.697Z","message":{"content":"w1 w2 w3 w4 w5 ","conversation":"edqg768e59yy","created":"2026-11-25T20:45:34.683Z","id":"m2","model":"fake-model","role":"assistant","status":"cancelled"},"type":"reply.finished","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.679Z","message":{"content":"","conversation":"adcx77jgvs63","created":"2026-11-25T20:45:34.679Z","error":{"code":"upstream_auth","message":"fake upstream error 401","status":401},"id":"m6","model":"fake-model","role":"assistant","status":"failed"},"type":"reply.finished","v":1}"#,
        #"{"at":"2026-11-25T20:45:35.294Z","message":{"content":"w1 w2 w3 w4 ","conversation":"449ypgq72d82","created":"2026-11-25T20:45:34.940Z","id":"m2","model":"fake-model","role":"assistant","status":"interrupted"},"type":"reply.finished","v":1}"#,
        #"{"at":"2026-11-25T20:45:35.258Z","message":{"content":"","conversation":"tghmdhqzyk72","created":"2026-11-25T20:45:35.256Z","finish_reason":"tool_calls","id":"m2","model":"fake-model","params":{"temperature":0.5},"role":"assistant","status":"complete","tool_calls":[{"arguments":"","id":"call_17_0","name":"hang"}],"usage":{"completion_tokens":1,"prompt_tokens":4,"total_tokens":5}},"type":"reply.finished","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.871Z","message":{"content":"","conversation":"hb2t7sft5dce","created":"2026-11-25T20:45:34.871Z","id":"m2.1","name":"echo","role":"tool","status":"streaming","tool_call_id":"call_14_0"},"type":"reply.started","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.872Z","message":{"content":"{\"ok\":true}","conversation":"hb2t7sft5dce","created":"2026-11-25T20:45:34.871Z","duration_ms":0,"http_status":200,"id":"m2.1","name":"echo","role":"tool","status":"complete","tool_call_id":"call_14_0"},"type":"reply.finished","v":1}"#,
        #"{"at":"2026-11-25T20:45:35.296Z","message":{"content":"The call was interrupted: the daemon stopped before it ended.","conversation":"tghmdhqzyk72","created":"2026-11-25T20:45:35.259Z","id":"m2.1","name":"hang","role":"tool","status":"interrupted","tool_call_id":"call_17_0"},"type":"reply.finished","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.680Z","title":"basics, renamed","type":"title","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.706Z","by":"m3","message":"m2","type":"superseded","v":1}"#,
        #"{"at":"2026-11-25T20:45:34.857Z","params":{"max_tokens":64,"temperature":0.25},"system":"Be kind.","type":"settings","v":1}"#,
    ]

    func testEveryLiteralLineReadsAndWritesBackTheSame() throws {
        for line in Self.lines {
            let json = try JSON.parse(line)
            let record = try XCTUnwrap(LogRecord(json: json), "not read: \(line)")
            let at = try XCTUnwrap(json["at"]?.string.flatMap(Timestamp.init(rfc3339:)))
            XCTAssertEqual(record.json(at: at), json, "written back differently: \(line)")
        }
    }

    /// What each line means, field by field: the keys on disk are the ones these values came from.
    func testTheLiteralLinesMeanWhatTheySay() throws {
        func record(_ index: Int) throws -> LogRecord { try XCTUnwrap(LogRecord(json: try JSON.parse(Self.lines[index]))) }
        guard case .header(let header) = try record(0) else { return XCTFail("not a header") }
        XCTAssertEqual([header.id, header.title, header.model, header.provider], ["449ypgq72d82", "crash", "fake-model", "default"])
        guard case .message(let user) = try record(2) else { return XCTFail("not a message") }
        XCTAssertEqual(user.author, Author(uid: 0, login: "root", name: "golden", clientID: "c1"))
        XCTAssertEqual([user.id, user.content, user.role.rawValue, user.status.rawValue], ["m3", "yes", "user", "complete"])
        guard case .replyText(let id, let content) = try record(4) else { return XCTFail("not reply text") }
        XCTAssertEqual([id, content], ["m2", "w1 w2 w3 w4 "])
        guard case .replyFinished(let complete) = try record(5) else { return XCTFail("not a finished reply") }
        XCTAssertEqual(complete.finishReason, "stop")
        XCTAssertEqual(complete.usage, Usage(promptTokens: 5, completionTokens: 4, totalTokens: 9))
        guard case .replyFinished(let failed) = try record(7) else { return XCTFail("not a finished reply") }
        XCTAssertEqual(failed.error, MessageError(code: .upstreamAuth, message: "fake upstream error 401", status: 401))
        guard case .replyFinished(let calls) = try record(9) else { return XCTFail("not a finished reply") }
        XCTAssertEqual(calls.toolCalls?.map(\.name), ["hang"])
        XCTAssertEqual(calls.toolCalls?.map(\.id), ["call_17_0"])
        guard case .replyFinished(let tool) = try record(11) else { return XCTFail("not a finished reply") }
        XCTAssertEqual([tool.role.rawValue, tool.content], ["tool", #"{"ok":true}"#])
        XCTAssertEqual(tool.tool, ToolResult(callID: "call_14_0", name: "echo", httpStatus: 200, durationMilliseconds: 0))
        XCTAssertEqual(try record(13), .title("basics, renamed"))
        XCTAssertEqual(try record(14), .superseded(message: "m2", by: "m3"))
        guard case .settings(let settings) = try record(15) else { return XCTFail("not settings") }
        XCTAssertEqual(settings.system, "Be kind.")
        XCTAssertEqual(settings.params?.temperature, 0.25)
        XCTAssertEqual(settings.params?.maxTokens, 64)
        XCTAssertNil(settings.model)
    }
}
