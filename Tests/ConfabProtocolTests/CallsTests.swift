import XCTest

@testable import ConfabProtocol

/// Every method's typed call: its params and its result read back what they wrote, field for
/// field, and a method whose samples are not its call's types fails here.
final class CallsTests: XCTestCase {
    private let id = "abcdefghjkmn"
    private let time = Timestamp(milliseconds: 1_700_000_000_123)

    private var info: ConversationInfo {
        ConversationInfo(id: id, title: "a title", created: time, updated: time, model: "m", system: "be brief", messageCount: 2,
                         provider: "default", profile: "p", params: SamplingParameters(temperature: 0.5, stop: ["\n"]),
                         sharedWith: [ConversationShare(uid: 1001, login: "bob", role: .read)])
    }

    private var message: Message {
        Message(id: "m1", conversation: id, role: .user, content: "hi \"there\"\n", status: .complete, created: time,
                author: Author(uid: 1000, login: "alice", name: "Alice", clientID: "c1"),
                attachments: [Attachment(name: "a.txt", type: .text, size: 3, sha256: String(repeating: "a", count: 64))])
    }

    private var compaction: Compaction {
        Compaction(first: "m1", last: "m4.2", summary: "they \"agreed\"\n", model: "m", provider: "default",
                   usage: Usage(promptTokens: 10, completionTokens: 4, totalTokens: 14), focus: "f", automatic: true, created: time)
    }

    private var server: ListedServer { ListedServer(name: "files", transport: .stdio, state: .failed, error: "gone", pid: 42, tools: 1) }

    /// A params value and a result value of the method, every optional field set.
    private func samples(_ method: RPCMethod) -> (params: any RPCObject, result: any RPCObject) {
        switch method {
        case .hello:
            let link = LinkDeclaration(id: "link-1", conversation: id, role: .write)
            return (HelloParams(client: "confab-attach", name: "Alice", gateway: true, link: link),
                    HelloResult(version: "1.2", clientID: "c7", user: HelloUser(uid: 1000, login: "alice", name: "Alice", link: link)))
        case .status:
            var status = StatusResult()
            (status.version, status.uptimeSeconds, status.conversations, status.clients) = ("1.2", 5, 3, 2)
            (status.streams, status.queued, status.searches) = (1, 4, 1)
            return (NoParams(), status)
        case .conversationCreate:
            var params = CreateParams()
            (params.title, params.system, params.model, params.provider, params.profile) = ("t", "s", "m", "local", "p")
            params.params = SamplingParameters(temperature: 0.2, maxTokens: 10, seed: 7, reasoningEffort: "high")
            return (params, ConversationResult(conversation: info))
        case .conversationList: return (ListParams(limit: 20), ListResult(conversations: [info, info]))
        case .conversationGet: return (ConversationTarget(conversation: id), ConversationResult(conversation: info))
        case .conversationRename:
            var params = RenameParams()
            (params.conversation, params.title) = (id, "new")
            return (params, ConversationResult(conversation: info))
        case .conversationConfigure:
            var params = ConfigureParams()
            (params.conversation, params.profile, params.model, params.system) = (id, "p", "m2", "")
            params.params = SamplingParameters(topP: 0.9)
            return (params, ConversationResult(conversation: info))
        case .conversationDelete: return (ConversationTarget(conversation: id), DeleteResult(deleted: id))
        case .conversationAttach:
            let clients = [ClientInfo(id: "c2", uid: 1001, login: "bob", name: "Bob", client: "confab-attach", link: "l1")]
            return (AttachParams(conversation: id, history: 200, quiet: true),
                    AttachResult(conversation: info, messages: [message], pending: message, tools: [message], clients: clients,
                                 compaction: compaction))
        case .conversationDetach: return (ConversationTarget(conversation: id), DetachResult(detached: true))
        case .conversationHistory:
            return (HistoryParams(conversation: id, before: "m9", limit: 10), HistoryResult(messages: [message], more: true, compaction: compaction))
        case .messageSend:
            return (SendParams(conversation: id, content: "hello", attachments: [AttachmentRef(name: "a.txt", sha256: String(repeating: "b", count: 64))]),
                    SendResult(message: message, reply: "m2"))
        case .generationCancel: return (CancelParams(conversation: id, message: "m2"), CancelResult(cancelled: "m2"))
        case .messageRegenerate: return (ConversationTarget(conversation: id), RegenerateResult(reply: "m4", replaces: "m2"))
        case .messageEdit: return (EditParams(conversation: id, message: "m3", content: "again"), EditResult(message: message, reply: "m6", replaces: "m3"))
        case .messageContinue: return (ConversationTarget(conversation: id), ContinueResult(reply: "m2"))
        case .conversationFork: return (ForkParams(conversation: id, at: "m2", title: "fork"), ForkResult(conversation: info, reply: "m3"))
        case .conversationSearch:
            return (SearchParams(query: "two words", limit: 5, conversation: id),
                    SearchResult(hits: [FoundMessage(conversation: id, title: "t", message: "m1", role: .assistant, created: time, snippet: "…two words…")]))
        case .modelsList:
            return (ModelsListParams(provider: "local"),
                    ModelsListResult(models: [ListedModel(id: "gpt", provider: "local")],
                                     errors: [ModelListingError(provider: "other", error: MessageError(code: .upstreamHTTP, message: "no", status: 500))]))
        case .profilesList:
            return (NoParams(), ProfilesListResult(profiles: [ListedProfile(name: "p", provider: "default", model: "m", system: "s",
                                                                            params: SamplingParameters(seed: 1), isDefault: true)]))
        case .conversationCompact: return (CompactParams(conversation: id, focus: "the plan"), CompactResult(compaction: compaction))
        case .conversationUncompact: return (ConversationTarget(conversation: id), UncompactResult(uncompacted: compaction))
        case .toolApprove: return (ApproveParams(conversation: id, call: "call_1", allow: true), ApproveResult(call: "call_1", allowed: true))
        case .conversationShare:
            return (ShareParams(conversation: id, uid: 1001, login: "bob", role: .write), ShareResult(conversation: info, allowed: true))
        case .conversationUnshare: return (UnshareParams(conversation: id, uid: 1001, login: "bob"), UnshareResult(conversation: info, unshared: true))
        case .blobPut:
            var result = BlobPutResult(upload: "u1", size: 3)
            result.attachment = StoredFile(type: .png, size: 3, sha256: String(repeating: "c", count: 64))
            return (BlobPutParams(upload: "u1", data: "YWJj", isFinal: true), result)
        case .attachmentGet:
            return (AttachmentGetParams(conversation: id, message: "m1", index: 2, offset: 4),
                    AttachmentGetResult(attachment: message.attachments![0], offset: 4, data: "YWJj", more: true))
        case .toolsList:
            let tool = ListedTool(name: "files__read", source: .mcp, server: "files", tool: "read", description: "reads", approval: .never, isListed: false)
            return (ToolsListParams(profile: "p", start: true), ToolsListResult(tools: [tool], servers: [server]))
        case .mcpRestart: return (MCPRestartParams(server: "files"), MCPRestartResult(server: server))
        case .usageSummary:
            var row = UsageRow(key: id)
            row.title = "t"
            row.add(Usage(promptTokens: 10, completionTokens: 3, totalTokens: 13, isEstimated: true, reasoningTokens: 1,
                          cacheReadTokens: 4, cacheWriteTokens: 2), cost: 0.25)
            row.add(Usage(promptTokens: 1, completionTokens: 1, totalTokens: 2), cost: nil)
            return (UsageParams(since: time, by: .conversation, conversation: id), UsageResult(rows: [row], total: row))
        }
    }

    func testEveryMethodsParamsAndResultReadBackWhatTheyWrote() throws {
        for method in RPCMethod.allCases {
            let call = method.call
            XCTAssertEqual(call.method, method)
            let (params, result) = samples(method)
            XCTAssertTrue(type(of: params) == call.paramsType, "\(method.rawValue): params sample is not \(call.paramsType)")
            XCTAssertTrue(type(of: result) == call.resultType, "\(method.rawValue): result sample is not \(call.resultType)")
            // Through the bytes a socket carries, as both ends see them.
            for sample in [params, result] {
                let line = RPC.request(id: 1, method: method.rawValue, params: sample.json)
                guard case .success(.request(_, _, let sent)) = RPC.parse(line.dropLast()) else { return XCTFail("\(method.rawValue): no request") }
                let read = try type(of: sample).init(decoding: sent)
                XCTAssertTrue(read.isSame(as: sample), "\(method.rawValue): \(read) is not \(sample)")
            }
        }
    }

    /// A field every sample sets: a sample that leaves one out does not prove it is read.
    func testEverySampleSetsEveryField() {
        for method in RPCMethod.allCases {
            let (params, result) = samples(method)
            for sample in [params, result] where !(sample is NoParams) {
                let written = sample.json.object ?? [:]
                XCTAssertFalse(written.isEmpty, method.rawValue)
                XCTAssertFalse(written.values.contains(.null), "\(method.rawValue): a null field in \(sample)")
            }
        }
    }

    /// What the daemon wrote as dictionaries before, key for key: nulls where a field is always
    /// there, nothing where it is left out.
    func testResultsKeepTheirWireShape() {
        XCTAssertEqual(CancelResult(cancelled: nil).json, ["cancelled": .null])
        XCTAssertEqual(MCPRestartResult().json, ["server": .null])
        XCTAssertEqual(ForkResult(conversation: info, reply: nil).json, ["conversation": info.json])
        XCTAssertEqual(AttachResult(conversation: info, messages: [], pending: nil, tools: [], clients: []).json,
                       ["conversation": info.json, "messages": [], "pending": .null, "tools": [], "clients": []])
        XCTAssertEqual(BlobPutResult(upload: "u1", size: 3).json, ["upload": "u1", "size": 3])
        XCTAssertEqual(BlobPutResult(attachment: StoredFile(type: .png, size: 3, sha256: "d")).json,
                       ["attachment": ["type": "image/png", "size": 3, "sha256": "d"]])
        XCTAssertEqual(ModelsListResult(models: [], errors: [ModelListingError(provider: "p", error: MessageError(code: .upstreamAuth, message: "no"))]).json,
                       ["models": [], "errors": [["provider": "p", "code": "upstream_auth", "message": "no"]]])
        XCTAssertEqual(ListedProfile(name: "p", provider: "default", model: nil, system: nil, params: SamplingParameters(), isDefault: false).json,
                       ["name": "p", "provider": "default", "params": [:], "default": false])
        XCTAssertEqual(HelloResult(version: "1", clientID: "c1", user: HelloUser(uid: 7, login: "a", name: "A", link: nil)).json,
                       ["server": "confabd", "version": "1", "protocol": .int(ProtocolVersion.current), "client_id": "c1",
                        "user": ["uid": 7, "login": "a", "name": "A"]])
    }

    /// The errors a request's params get, as the daemon sent them before the calls were typed.
    func testParamsErrorsNameTheField() {
        func error(_ type: any RPCObject.Type, _ params: JSON, bounds: RPCBounds = RPCBounds()) -> String? {
            do {
                _ = try type.init(decoding: params, bounds: bounds)
                return nil
            } catch {
                return error.code == RPCError.invalidParams || error.code == RPCError.limitReached ? error.message : "code \(error.code)"
            }
        }
        XCTAssertEqual(error(ConversationTarget.self, [:]), "missing parameter \"conversation\"")
        XCTAssertEqual(error(ConversationTarget.self, ["conversation": .null]), "parameter \"conversation\" must be a string, got null")
        XCTAssertEqual(error(RenameParams.self, ["conversation": "x", "title": 3]), "parameter \"title\" must be a string, got number")
        XCTAssertEqual(error(AttachParams.self, ["conversation": "x", "history": 11], bounds: RPCBounds(maxHistory: 10)),
                       "parameter \"history\" must be between 0 and 10")
        XCTAssertEqual(error(AttachParams.self, ["conversation": "x", "quiet": "yes"]), "parameter \"quiet\" must be true or false, got string")
        XCTAssertEqual(error(ListParams.self, ["limit": "5"]), "parameter \"limit\" must be an integer, got string")
        XCTAssertEqual(error(ApproveParams.self, ["conversation": "x", "call": "c"]), "missing parameter \"allow\" (true or false)")
        XCTAssertEqual(error(AttachmentGetParams.self, ["conversation": "x", "message": "m1", "index": .null]), "missing parameter \"index\"")
        XCTAssertEqual(error(HelloParams.self, ["link": ["id": "x"]]),
                       "parameter \"link\" must be {\"id\", \"conversation\", \"role\": \"read\" or \"write\"}")
        XCTAssertEqual(error(CreateParams.self, ["params": ["temperature": "hot"]])?.hasPrefix("parameter params.temperature"), true)
        XCTAssertEqual(error(SendParams.self, ["conversation": "x", "content": "c", "attachments": "a"]),
                       "parameter \"attachments\" must be an array of {name, sha256}, got string")
        XCTAssertEqual(error(SendParams.self, ["conversation": "x", "content": "c", "attachments": [["name": 1]]]),
                       "parameter \"attachments[0].name\" must be a string")
        XCTAssertNil(error(ConfigureParams.self, ["conversation": "x", "system": .null]))
        XCTAssertEqual(try ConfigureParams(decoding: ["conversation": "x", "system": .null]).system, "", "null clears the system prompt")
        XCTAssertNil(try ConfigureParams(decoding: ["conversation": "x"]).system, "left out, it stays")
    }
}

extension RPCCall {
    static var paramsType: any RPCObject.Type { Params.self }
    static var resultType: any RPCObject.Type { Result.self }
}

extension RPCObject {
    func isSame(as other: any RPCObject) -> Bool { (other as? Self) == self }
}

/// `usage.summary`'s params as the daemon reads them.
final class UsageParamsTests: XCTestCase {
    func testGroupingAndTimeAreChecked() throws {
        XCTAssertEqual(try UsageParams(decoding: [:]).by, .model)
        XCTAssertEqual(try UsageParams(decoding: ["by": "day"]).by, .day)
        XCTAssertThrowsError(try UsageParams(decoding: ["by": "week"])) { error in
            XCTAssertEqual((error as? RPCError)?.message, "parameter \"by\" must be \"model\", \"conversation\", \"day\", \"message\"")
        }
        XCTAssertThrowsError(try UsageParams(decoding: ["since": "yesterday"])) { error in
            XCTAssertEqual((error as? RPCError)?.message, "parameter \"since\" is not a time")
        }
        XCTAssertThrowsError(try UsageParams(decoding: ["by": "message"])) { error in
            XCTAssertEqual((error as? RPCError)?.message, "parameter \"by\": \"message\" needs \"conversation\"")
        }
        XCTAssertThrowsError(try UsageResult(decoding: ["rows": [], "total": ["key": "total", "replies": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                                               "reasoning_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0,
                                                                               "estimated_replies": 0, "unpriced_replies": 0, "cost": "free"]]))
    }
}
