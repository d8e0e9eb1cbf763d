import ConfabProtocol
import Curl
import ServiceSettings

/// The models a provider's `GET {base_url}/models` names, or why it could not say.
public typealias ModelListing = Result<[String], MessageError>

/// The listing body every API confab speaks answers with: `{"data":[{"id":…},…]}` (OpenAI,
/// llama.cpp, Ollama, LiteLLM, Anthropic). Other members are ignored; ids are kept in the
/// server's order with repeats dropped.
public func parseModelList(_ body: [UInt8]) -> ModelListing {
    let json: JSON
    do {
        json = try JSON.parse(body)
    } catch {
        return .failure(MessageError(code: .upstreamProtocol, message: "the model listing is not JSON: \(error)"))
    }
    guard case .object = json else {
        return .failure(MessageError(code: .upstreamProtocol, message: "the model listing is a JSON \(json.typeName), not an object"))
    }
    guard let data = json["data"]?.array else {
        return .failure(MessageError(code: .upstreamProtocol, message: "the model listing has no \"data\" array"))
    }
    var ids: [String] = []
    var seen: Set<String> = []
    for (index, entry) in data.enumerated() {
        guard let id = entry["id"]?.string, !id.isEmpty else {
            return .failure(MessageError(code: .upstreamProtocol, message: "the model listing's entry \(index) has no \"id\" string"))
        }
        if seen.insert(id).inserted { ids.append(id) }
    }
    return .success(ids)
}

/// How a listing request ended, in adapter terms: the status and body of a response, or a
/// failure before one arrived.
public func modelListing(status: Int, body: [UInt8]) -> ModelListing {
    guard (200..<300).contains(status) else { return .failure(httpFailure(status: status, body: body)) }
    return parseModelList(body)
}

/// One model listing being fetched. Cancel it to stop; its handler then hears nothing more.
public final class ModelListingRequest {
    fileprivate var transfer: CurlTransfer?
    fileprivate weak var client: UpstreamClient?
    fileprivate var handler: ((ModelListing) -> Void)?
    fileprivate var body: [UInt8] = []

    fileprivate init() {}

    public func cancel() {
        handler = nil
        if let transfer, let client { client.multi.cancel(transfer) }
        transfer = nil
    }

    fileprivate func finish(_ result: ModelListing) {
        guard let handler else { return }
        cancel()
        handler(result)
    }
}

extension UpstreamClient {
    /// A listing longer than this is refused rather than held: real ones are a few hundred KiB
    /// at most, and the daemon keeps the answer for a minute.
    public static let maxModelListingBody = 4 * 1024 * 1024

    /// Asks `provider` which models it has: a plain GET on the same transport as replies, with the
    /// provider's timeouts and headers. `handler` hears exactly once (unless the request is
    /// cancelled first), never before this returns.
    public func listModels(of provider: Provider, handler: @escaping (ModelListing) -> Void) -> ModelListingRequest {
        let api = provider.api.adapter
        let config = provider.config
        let request = ModelListingRequest()
        request.client = self
        request.handler = handler
        if let problem = api.missingConfiguration(config) {
            multi.loop.onNextTurn { request.finish(.failure(problem)) }
            return request
        }
        let http = api.modelsRequest(config: config).adding(config.headers)
        // A listing is one short answer, so it also gets an overall deadline: a server that
        // trickles a byte now and then must not hold the callers for ever.
        let transfer = CurlTransfer(url: http.url, body: nil, headers: http.headers,
                                    connectTimeoutSeconds: config.connectTimeoutSeconds, stallSeconds: config.timeoutSeconds,
                                    totalSeconds: config.connectTimeoutSeconds + config.timeoutSeconds)
        request.transfer = transfer
        // The transfer holds the request through these until it ends: nobody else needs to.
        transfer.onData = { bytes in
            guard request.body.count + bytes.count <= Self.maxModelListingBody else {
                request.finish(.failure(MessageError(code: .upstreamProtocol,
                    message: "the model listing is larger than \(Self.maxModelListingBody / (1024 * 1024)) MiB")))
                return false
            }
            request.body.append(contentsOf: bytes)
            return true
        }
        transfer.onComplete = { [unowned transfer] outcome in
            let status = transfer.responseCode
            let requestSent = transfer.requestSent
            request.transfer = nil
            guard outcome.isSuccess else {
                let code: ReplyErrorCode = outcome.isTimeout && requestSent ? .upstreamTimeout
                    : (status == 0 ? .upstreamConnection : .upstreamProtocol)
                request.finish(.failure(MessageError(code: code, message: outcome.message)))
                return
            }
            request.finish(api.models(status: status, body: request.body))
        }
        multi.start(transfer)
        return request
    }
}
