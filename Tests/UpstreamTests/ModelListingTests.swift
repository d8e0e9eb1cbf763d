import XCTest

import ConfabProtocol
import ServiceSettings
@testable import Upstream

final class ModelListingTests: XCTestCase {
    private func ids(_ listing: ModelListing) -> [String]? {
        if case .success(let ids) = listing { return ids }
        return nil
    }

    private func error(_ listing: ModelListing) -> MessageError? {
        if case .failure(let error) = listing { return error }
        return nil
    }

    private let config = UpstreamConfig(baseURL: "http://127.0.0.1:9/v1/", apiKey: "sk-test")

    func testOpenAIsListingReadsIdsInOrderIgnoringOtherMembersAndRepeats() {
        let body = #"{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1,"owned_by":"system"},{"id":"gpt-4o-mini","object":"model"},{"id":"gpt-4o"}]}"#
        for api in [ProviderAPI.chat, .completions(CompletionsOptions())] {
            XCTAssertEqual(ids(api.adapter.models(status: 200, body: Array(body.utf8))), ["gpt-4o", "gpt-4o-mini"], api.name)
        }
        XCTAssertEqual(ids(parseModelList(Array(#"{"data":[]}"#.utf8))), [])
    }

    func testAnthropicsListingReadsIds() {
        let body = #"{"data":[{"type":"model","id":"claude-sonnet-4-20250514","display_name":"Claude Sonnet 4","created_at":"2025-05-22T00:00:00Z"},{"type":"model","id":"claude-3-5-haiku-20241022"}],"has_more":false,"first_id":"claude-sonnet-4-20250514","last_id":"claude-3-5-haiku-20241022"}"#
        let api = ProviderAPI.anthropic(AnthropicOptions()).adapter
        XCTAssertEqual(ids(api.models(status: 200, body: Array(body.utf8))), ["claude-sonnet-4-20250514", "claude-3-5-haiku-20241022"])
    }

    func testBodiesOfAnotherShapeAreProtocolErrors() {
        let bad = ["", "not json", "[]", #"{"models":["a"]}"#, #"{"data":{"id":"a"}}"#, #"{"data":[{"name":"a"}]}"#,
                   #"{"data":[{"id":7}]}"#, #"{"data":[{"id":""}]}"#, #"{"data":["a"]}"#, #"{"data":[{"id":"a"}]"#]
        for body in bad {
            let failure = error(parseModelList(Array(body.utf8)))
            XCTAssertEqual(failure?.code, .upstreamProtocol, body)
            XCTAssertFalse(failure?.message.isEmpty ?? true, body)
        }
    }

    func testRefusalsMapToTheReplyErrorCodesWithTheServersMessage() {
        let body = Array(#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#.utf8)
        let api = OpenAIChatAPI()
        XCTAssertEqual(error(api.models(status: 401, body: body)), MessageError(code: .upstreamAuth, message: "Incorrect API key provided", status: 401))
        XCTAssertEqual(error(api.models(status: 403, body: body))?.code, .upstreamAuth)
        XCTAssertEqual(error(api.models(status: 429, body: body))?.code, .rateLimited)
        XCTAssertEqual(error(api.models(status: 404, body: []))?.code, .upstreamHTTP)
        XCTAssertEqual(error(api.models(status: 404, body: []))?.status, 404)
        let anthropic = Array(#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.utf8)
        XCTAssertEqual(error(AnthropicMessagesAPI().models(status: 529, body: anthropic)),
                       MessageError(code: .upstreamHTTP, message: "Overloaded", status: 529))
    }

    func testEachAPIsListingRequestCarriesItsKeyHeaders() {
        let chat = OpenAIChatAPI().modelsRequest(config: config)
        XCTAssertEqual(chat.url, "http://127.0.0.1:9/v1/models")
        XCTAssertTrue(chat.headers.contains("Authorization: Bearer sk-test"), "\(chat.headers)")
        XCTAssertEqual(chat.body, [])
        XCTAssertEqual(OpenAICompletionsAPI().modelsRequest(config: config), chat)

        let anthropic = AnthropicMessagesAPI(options: AnthropicOptions(version: "2023-06-01")).modelsRequest(config: config)
        XCTAssertEqual(anthropic.url, "http://127.0.0.1:9/v1/models?limit=1000")
        XCTAssertTrue(anthropic.headers.contains("x-api-key: sk-test"), "\(anthropic.headers)")
        XCTAssertTrue(anthropic.headers.contains("anthropic-version: 2023-06-01"), "\(anthropic.headers)")
        XCTAssertFalse(anthropic.headers.contains { $0.lowercased().hasPrefix("authorization:") }, "\(anthropic.headers)")

        var keyless = config
        keyless.apiKey = nil
        XCTAssertFalse(OpenAIChatAPI().modelsRequest(config: keyless).headers.contains { $0.hasPrefix("Authorization:") })
    }
}
