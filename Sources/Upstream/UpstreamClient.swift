import ConfabProtocol
import Curl
import EventLoop
import SSE
import ServiceSettings

public enum ReplyEvent {
    case text(String)
    /// A piece of the model's reasoning.
    case reasoning(String)
    /// A whole reasoning item the API wants back in later requests of a tool loop
    /// (`ChatStreamEvent.reasoningReplay`), once complete; also in `ReplyStream.reasoningItems`.
    case reasoningItem(JSON)
    /// The reply is over. `error` is nil when it completed. `retryAfterSeconds` is the
    /// upstream's Retry-After, when it sent one with an error. `toolCalls`: what the reply
    /// asked for, put together from its pieces (empty when it asked for none).
    case finished(finishReason: String?, usage: TokenUsage?, error: MessageError?, retryAfterSeconds: Int?, toolCalls: [ToolCall])
}

/// One reply being streamed. Cancel it to stop; its handler then hears nothing more.
public final class ReplyStream {
    fileprivate var transfer: CurlTransfer?
    fileprivate weak var client: UpstreamClient?
    fileprivate var handler: ((ReplyEvent) -> Void)?
    fileprivate var parser = SSEParser()
    fileprivate var decoder: any ChatEventDecoder
    fileprivate var status = 0
    fileprivate var isEventStream = false
    /// A 2xx answer in JSON rather than events: some proxies answer a streamed request with the
    /// whole reply in one body, read once it is all here.
    fileprivate var isWholeReply = false
    /// An error body, or the whole reply in JSON.
    fileprivate var errorBody: [UInt8] = []
    /// Whether any text came: a stream that ends with none, no tool call and no finish reason
    /// is no answer at all.
    fileprivate var sawText = false
    fileprivate var finishReason: String?
    /// The reasoning items the API wants back (`ChatStreamEvent.reasoningReplay`), in order.
    public fileprivate(set) var reasoningItems: [JSON] = []
    fileprivate var usage: TokenUsage?
    fileprivate var sawDone = false
    fileprivate var retryAfterSeconds: Int?
    fileprivate var toolCalls = ToolCallAssembler()
    /// The events of one read, kept between reads for its capacity.
    fileprivate var spareEvents: [ChatStreamEvent] = []
    /// Fails the reply when the upstream sends no byte for `timeoutSeconds`. libcurl's
    /// low-speed check averages over several seconds and so fires late; this one is exact.
    fileprivate var stallTimer: Timer?

    fileprivate init(decoder: any ChatEventDecoder) { self.decoder = decoder }

    deinit { stallTimer?.close() }

    public func cancel() {
        handler = nil
        stopStallTimer()
        if let transfer, let client { client.multi.cancel(transfer) }
        transfer = nil
    }

    fileprivate func stopStallTimer() {
        stallTimer?.close()
        stallTimer = nil
    }

    fileprivate func finish(_ error: MessageError?) {
        guard let handler else { return }
        self.handler = nil
        stopStallTimer()
        if let transfer, let client { client.multi.cancel(transfer) }
        transfer = nil
        handler(.finished(finishReason: finishReason, usage: usage, error: error, retryAfterSeconds: error == nil ? nil : retryAfterSeconds,
                          toolCalls: error == nil ? toolCalls.calls : []))
    }

    /// The reply is over (`[DONE]`) but the HTTP body may not be: the transfer is left to read it
    /// to its end, discarding it, so curl can keep the connection for the next request (a
    /// transfer removed mid-body takes its connection with it). A server that never ends the
    /// body loses the connection after `drainSeconds`.
    /// No text, no tool call and no finish reason: whatever else came (reasoning, usage), no answer.
    fileprivate var isEmptyAnswer: Bool { finishReason == nil && !sawText && toolCalls.isEmpty }

    fileprivate func finishLeavingTransferToDrain(drainSeconds: UInt64, error: MessageError? = nil) {
        guard handler != nil else { return }
        if let transfer, let client {
            let multi = client.multi
            let deadline = Timer(loop: multi.loop)
            deadline.start(after: drainSeconds * 1000) { [weak transfer] in
                deadline.close()
                if let transfer { multi.cancel(transfer) }
            }
            // Nothing here may refer to this stream: it goes away once its reply is announced.
            transfer.onData = { _ in true }
            transfer.onComplete = { _ in deadline.close() }
        }
        transfer = nil
        finish(error)
    }
}

/// The transport for streamed replies: libcurl on the daemon's loop, many at once, no threads;
/// timeouts, the stall timer, status and content-type checks. What the request and the stream
/// look like is the `ChatAPI` adapter's business.
public final class UpstreamClient {
    let multi: CurlMulti
    static let maxErrorBody = 64 * 1024
    /// The most a reply given whole in one JSON body may take; a larger one is refused.
    static let maxWholeReply = 16 << 20

    public init(loop: Loop) {
        multi = CurlMulti(loop: loop)
    }

    public var activeStreams: Int { multi.activeTransfers }

    /// A curl_multi_* call failed (the transfer it concerned still gets its outcome).
    public var onTransportError: ((String) -> Void)? {
        get { multi.onError }
        set { multi.onError = newValue }
    }

    public func close() { multi.close() }

    /// Starts a streamed reply from `provider`. `handler` gets text pieces, then exactly one
    /// `.finished` (unless the stream is cancelled first). It is never called before this returns.
    public func stream(_ request: ChatRequest, from provider: Provider, handler: @escaping (ReplyEvent) -> Void) -> ReplyStream {
        let api = provider.api.adapter
        let config = provider.config
        let stream = ReplyStream(decoder: api.makeDecoder(for: request))
        stream.client = self
        stream.handler = handler
        if let problem = api.missingConfiguration(config) {
            // Deliver on the next turn, like every other outcome.
            multiLoop.onNextTurn { [weak stream] in stream?.finish(problem) }
            return stream
        }
        let http = api.request(for: request, config: config).adding(config.headers)
        let transfer = CurlTransfer(url: http.url, body: http.body, headers: http.headers,
                                    connectTimeoutSeconds: config.connectTimeoutSeconds, stallSeconds: config.timeoutSeconds)
        stream.transfer = transfer
        let stallMilliseconds = UInt64(config.timeoutSeconds) * 1000
        let stallTimer = Timer(loop: multiLoop)
        stream.stallTimer = stallTimer
        // Until the first byte the connection may still be coming up: connect_timeout_seconds
        // is libcurl's to enforce, so the first deadline allows for both.
        // Unowned, not weak: a weak reference would give the stream a side table and make every
        // retain of it slower, on the path of every token; the timer is closed when it goes.
        stallTimer.start(after: stallMilliseconds + UInt64(config.connectTimeoutSeconds) * 1000) { [unowned stream] in
            stream.finish(MessageError(code: .upstreamTimeout,
                                        message: "the upstream sent nothing for \(stallMilliseconds / 1000) s"))
        }
        transfer.onData = { [unowned stream, unowned transfer] bytes in
            stream.stallTimer?.postpone(to: stallMilliseconds)
            return Self.receive(bytes, on: stream, transfer: transfer)
        }
        transfer.onComplete = { [unowned stream, unowned transfer] outcome in
            Self.complete(stream, outcome, requestSent: transfer.requestSent, api: api)
        }
        multi.start(transfer)
        return stream
    }

    private var multiLoop: Loop { multi.loop }

    private static func receive(_ bytes: UnsafeRawBufferPointer, on stream: ReplyStream, transfer: CurlTransfer) -> Bool {
        if stream.status == 0 {
            stream.status = transfer.responseCode
            let contentType = transfer.header("Content-Type")?.lowercased() ?? ""
            stream.isEventStream = contentType.contains("text/event-stream")
            stream.isWholeReply = !stream.isEventStream && contentType.contains("json") && (200..<300).contains(stream.status)
            // Seconds only; an HTTP date here is rare enough to fall back to our own backoff.
            stream.retryAfterSeconds = transfer.header("Retry-After").flatMap { Int($0.filter { !$0.isWhitespace }) }
        }
        guard (200..<300).contains(stream.status), stream.isEventStream else {
            if stream.isWholeReply {
                guard stream.errorBody.count + bytes.count <= maxWholeReply else {
                    stream.finish(MessageError(code: .upstreamProtocol,
                        message: "the upstream answered in one JSON body larger than \(maxWholeReply >> 20) MiB instead of an event stream",
                        status: stream.status))
                    return false
                }
                stream.errorBody.append(contentsOf: bytes)
                return true
            }
            let room = maxErrorBody - stream.errorBody.count
            if room > 0 { stream.errorBody.append(contentsOf: bytes.prefix(room)) }
            return true
        }
        // Decoded first, acted on after: acting may end the stream, which resets the parser.
        // The parser, the decoder and the events array are taken out of the stream for the read,
        // so that decoding an event touches no class property (no exclusivity check, no retain).
        var events = stream.spareEvents
        stream.spareEvents = []
        defer {
            events.removeAll(keepingCapacity: true)
            stream.spareEvents = events
        }
        var parser = stream.parser
        stream.parser = SSEParser(maxLineBytes: parser.maxLineBytes)
        var decoder = stream.decoder
        var failure: MessageError?
        do {
            try parser.feed(bytes) { event in
                guard failure == nil else { return }
                do {
                    try decoder.decode(event, into: &events)
                } catch {
                    failure = MessageError(code: .upstreamProtocol, message: "unreadable event from upstream: \(error)")
                }
            }
        } catch {
            failure = MessageError(code: .upstreamProtocol, message: "upstream sent a line longer than the parser accepts")
        }
        stream.parser = parser
        stream.decoder = decoder
        for event in events {
            switch event {
            case .content(let text):
                stream.sawText = true
                stream.handler?(.text(text))
            case .finish(let reason): stream.finishReason = reason
            case .usage(let usage): stream.usage = usage
            case .toolCall(let piece): stream.toolCalls.add(piece)
            case .reasoning(let text): stream.handler?(.reasoning(text))
            case .reasoningReplay(let item):
                stream.reasoningItems.append(item)
                stream.handler?(.reasoningItem(item))
            case .error(let info):
                stream.finish(MessageError(code: .upstreamError, message: info.message))
                return false
            case .done:
                stream.sawDone = true
                // `[DONE]` after nothing at all is no answer, not an empty one.
                stream.finishLeavingTransferToDrain(drainSeconds: 5, error: stream.isEmptyAnswer ? .noAnswer : nil)
                return true
            }
        }
        if let failure {
            stream.finish(failure)
            return false
        }
        return stream.handler != nil
    }

    private static func complete(_ stream: ReplyStream, _ outcome: CurlOutcome, requestSent: Bool, api: any ChatAPI) {
        stream.transfer = nil
        guard stream.handler != nil else { return }
        if stream.status != 0, !(200..<300).contains(stream.status) {
            stream.finish(api.failure(status: stream.status, body: stream.errorBody))
            return
        }
        if stream.isWholeReply, outcome.isSuccess {
            readWholeReply(of: stream)
            return
        }
        if stream.status != 0, !stream.isEventStream {
            let info = upstreamErrorMessage(status: stream.status, body: stream.errorBody)
            stream.finish(MessageError(code: .upstreamProtocol,
                message: "expected an event stream from the upstream, got: \(info.message)", status: stream.status))
            return
        }
        if !outcome.isSuccess {
            // A timeout before the request went out is connect_timeout_seconds running out (a host
            // that drops packets, a TLS handshake that gets no answer): connecting failed.
            let code: ReplyErrorCode = outcome.isTimeout && requestSent ? .upstreamTimeout
                : (stream.status == 0 ? .upstreamConnection : .upstreamProtocol)
            stream.finish(MessageError(code: code, message: outcome.message))
            return
        }
        stream.parser.finish()
        if stream.isEmptyAnswer {
            stream.finish(.noAnswer)
        } else if stream.finishReason != nil || stream.sawDone {
            stream.finish(nil)
        } else {
            stream.finish(MessageError(code: .upstreamProtocol, message: "the upstream ended the stream before the reply finished"))
        }
    }

    /// A streamed request answered with the whole reply in one JSON body (a `chat.completion`,
    /// a `text_completion`, an Anthropic `message`): read as the reply it is, its text given to
    /// the handler as one piece. JSON that is none of these is refused as an event stream would be.
    private static func readWholeReply(of stream: ReplyStream) {
        var events: [ChatStreamEvent] = []
        do {
            try stream.decoder.decodeWhole(stream.errorBody, into: &events)
        } catch {
            stream.finish(MessageError(code: .upstreamProtocol, message: "unreadable reply from upstream: \(error)", status: stream.status))
            return
        }
        guard !events.isEmpty else {
            let info = upstreamErrorMessage(status: stream.status, body: stream.errorBody)
            stream.finish(MessageError(code: .upstreamProtocol,
                message: "expected an event stream or a whole reply from the upstream, got: \(info.message)", status: stream.status))
            return
        }
        var text = ""
        for event in events {
            switch event {
            case .content(let piece): text += piece
            case .finish(let reason): stream.finishReason = reason
            case .usage(let usage): stream.usage = usage
            case .toolCall(let piece): stream.toolCalls.add(piece)
            case .reasoning(let piece): stream.handler?(.reasoning(piece))
            case .reasoningReplay(let item):
                stream.reasoningItems.append(item)
                stream.handler?(.reasoningItem(item))
            case .error(let info):
                stream.finish(MessageError(code: .upstreamError, message: info.message))
                return
            case .done: break
            }
        }
        if !text.isEmpty {
            stream.sawText = true
            stream.handler?(.text(text))
        }
        // A whole body is a whole reply: it ends here whether or not it names a finish reason.
        stream.finish(stream.isEmptyAnswer ? .noAnswer : nil)
    }
}

extension MessageError {
    /// A 2xx answer that ended with no text, no tool call and no finish reason: what some
    /// servers (llama.cpp's, for one) give for a context longer than the model's window.
    public static let noAnswer = MessageError(code: .upstreamProtocol,
        message: "the server gave no answer: it sent no text, no tool call and no finish reason")
}
