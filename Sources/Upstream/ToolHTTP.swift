import ConfabProtocol
import Curl

/// How one HTTP call of a tool went: its answer (the first `maxResponseBytes` of the body and
/// how long the whole was), or why there was none.
public struct ToolHTTPOutcome: Sendable {
    public var status: Int?
    public var body: [UInt8]
    /// Bytes the server sent (its Content-Length when it gave one and the body was cut).
    public var totalBytes: Int
    /// `tool_timeout` or `tool_connection`; nil when the tool answered.
    public var error: MessageError?
    public var durationMilliseconds: Int
}

/// A tool's HTTP call in flight. Cancel it to abort; its completion is then never called.
public final class ToolHTTPCall {
    fileprivate var transfer: CurlTransfer?
    fileprivate weak var client: UpstreamClient?

    public func cancel() {
        if let transfer, let client { client.multi.cancel(transfer) }
        transfer = nil
    }
}

extension UpstreamClient {
    /// Calls a tool's URL on the daemon's loop, like a reply's request (libcurl's multi handle,
    /// no thread): the whole call may take `timeoutSeconds`; at most `maxResponseBytes` of the
    /// answer are kept and the rest is counted, up to 64 MiB, after which the call stops.
    /// `completion` runs on a later loop turn, once.
    public func callTool(method: String, url: String, headers: [String], body: [UInt8]?, timeoutSeconds: Int,
                         maxResponseBytes: Int, completion: @escaping (ToolHTTPOutcome) -> Void) -> ToolHTTPCall {
        let call = ToolHTTPCall()
        call.client = self
        let started = multi.loop.now
        let transfer = CurlTransfer(url: url, body: body, headers: headers, connectTimeoutSeconds: min(timeoutSeconds, 10),
                                    stallSeconds: timeoutSeconds, totalSeconds: timeoutSeconds,
                                    method: method == "GET" || method == "POST" ? nil : method)
        call.transfer = transfer
        var kept: [UInt8] = []
        var total = 0
        let countLimit = 64 << 20
        let loop = multi.loop
        func outcome(status: Int?, error: MessageError?) -> ToolHTTPOutcome {
            let declared = transfer.header("Content-Length").flatMap { Int($0.filter { !$0.isWhitespace }) }
            return ToolHTTPOutcome(status: status, body: kept, totalBytes: max(total, declared ?? 0), error: error,
                                   durationMilliseconds: Int(loop.now - started))
        }
        transfer.onData = { [unowned transfer] bytes in
            total += bytes.count
            let room = maxResponseBytes - kept.count
            if room > 0 { kept.append(contentsOf: bytes.prefix(room)) }
            guard total > countLimit else { return true }
            // Enough to say it was cut; reading on would only spend the time limit.
            let result = outcome(status: transfer.responseCode, error: nil)
            call.transfer = nil
            loop.onNextTurn { completion(result) }
            return false
        }
        transfer.onComplete = { [unowned transfer] result in
            call.transfer = nil
            let status = transfer.responseCode
            if result.isSuccess {
                completion(outcome(status: status, error: nil))
            } else if result.isTimeout {
                completion(outcome(status: status == 0 ? nil : status, error: MessageError(code: .toolTimeout,
                    message: "the tool did not answer within \(timeoutSeconds) s")))
            } else {
                completion(outcome(status: status == 0 ? nil : status, error: MessageError(code: .toolConnection,
                    message: "the tool could not be reached: \(result.message)")))
            }
        }
        multi.start(transfer)
        return call
    }
}
