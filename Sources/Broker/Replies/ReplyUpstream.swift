import ConfabProtocol
import ServiceSettings
import Upstream

/// Something started on the broker's behalf (a reply's stream, a tool's HTTP call, a model
/// listing) that can be stopped: after `cancel` its handler hears nothing more.
public protocol UpstreamCall: AnyObject {
    func cancel()
}

/// What the broker asks of the model servers and of tools' HTTP endpoints. `UpstreamClient` is
/// the real one (libcurl on the loop); a test gives the broker a stand-in that answers in the
/// same process. Each handler runs on the loop, later than the call that started it.
public protocol ReplyUpstream: AnyObject {
    /// Told of transport trouble that concerns no one request (for the daemon's log).
    var onTransportError: ((String) -> Void)? { get set }
    /// Streams a reply: text as it comes, then one `finished`.
    func startReply(_ request: ChatRequest, from provider: Provider, handler: @escaping (ReplyEvent) -> Void) -> any UpstreamCall
    /// Makes a tool's HTTP call; `completion` runs once.
    func startToolCall(method: String, url: String, headers: [String], body: [UInt8]?, timeoutSeconds: Int,
                       maxResponseBytes: Int, completion: @escaping (ToolHTTPOutcome) -> Void) -> any UpstreamCall
    /// Asks a provider which models it serves; `handler` runs once.
    func startModelListing(of provider: Provider, handler: @escaping (ModelListing) -> Void) -> any UpstreamCall
}

extension ReplyStream: UpstreamCall {}
extension ToolHTTPCall: UpstreamCall {}
extension ModelListingRequest: UpstreamCall {}

extension UpstreamClient: ReplyUpstream {
    public func startReply(_ request: ChatRequest, from provider: Provider, handler: @escaping (ReplyEvent) -> Void) -> any UpstreamCall {
        stream(request, from: provider, handler: handler)
    }

    public func startToolCall(method: String, url: String, headers: [String], body: [UInt8]?, timeoutSeconds: Int,
                              maxResponseBytes: Int, completion: @escaping (ToolHTTPOutcome) -> Void) -> any UpstreamCall {
        callTool(method: method, url: url, headers: headers, body: body, timeoutSeconds: timeoutSeconds,
                 maxResponseBytes: maxResponseBytes, completion: completion)
    }

    public func startModelListing(of provider: Provider, handler: @escaping (ModelListing) -> Void) -> any UpstreamCall {
        listModels(of: provider, handler: handler)
    }
}
