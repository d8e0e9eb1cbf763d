/// The client's side of the socket without its I/O: requests framed with ids of their own,
/// bytes received split into lines and classified, answers matched to the requests that are
/// waiting for them, notifications decoded and handed on in the order they came, and a
/// method's typed result read through its `RPCCall`. The client's blocking `Connection`, the
/// browser gateway's NIO channels and the tests drive it with the bytes they read and write.
public struct RPCClientCore: Sendable {
    /// Something the daemon sent, in arrival order.
    public enum Event: Equatable, Sendable {
        /// A notification this version knows, decoded (others are dropped as they arrive).
        case notification(ServerNotification)
        /// The answer to a request made here and not answered before.
        case answer(id: Int, result: Result<JSON, RPCError>)
        /// The successful answer to a request made with `requestEncoded`, as its bytes.
        case encodedAnswer(id: Int, EncodedAnswer)
        /// An error the daemon could not tie to a request (id null): framing is lost, or a
        /// frame of ours was unreadable. Nothing good follows it.
        case fatal(RPCError)
        /// A frame to send back: the protocol has no requests from the daemon, and one is
        /// answered "method not found".
        case send([UInt8])
    }

    private var framer: LineFramer
    private var nextID = 1
    /// Requests sent and not yet answered.
    public private(set) var waiting: Set<Int> = []
    /// Those of them whose successful answer is wanted as bytes (`requestEncoded`).
    private var wantEncoded: Set<Int> = []
    /// Lines that were not frames, or frames no one asked for (answers to ids not waiting).
    public private(set) var ignoredLines = 0

    public init(maxLineBytes: Int = 64 << 20) {
        framer = LineFramer(maxLineBytes: maxLineBytes)
    }

    public var maxLineBytes: Int { framer.maxLineBytes }

    /// A request's frame, under a new id that its answer will carry.
    public mutating func request(_ method: RPCMethod, _ params: JSON = [:]) -> (id: Int, frame: [UInt8]) {
        let id = nextID
        nextID += 1
        waiting.insert(id)
        return (id, RPC.request(id: .int(id), method: method.rawValue, params: params))
    }

    /// A request whose successful answer comes as `encodedAnswer`, its bytes unparsed but
    /// checked (an error answer comes as any other).
    public mutating func requestEncoded(_ method: RPCMethod, _ params: JSON = [:]) -> (id: Int, frame: [UInt8]) {
        let request = request(method, params)
        wantEncoded.insert(request.id)
        return request
    }

    /// A method's typed params, framed.
    public mutating func request<Call: RPCCall>(_: Call.Type, _ params: Call.Params) -> (id: Int, frame: [UInt8]) {
        request(Call.method, params.json)
    }

    /// Forgets a request whose answer no one will wait for: an answer to it is ignored.
    public mutating func abandon(_ id: Int) {
        waiting.remove(id)
        wantEncoded.remove(id)
    }

    /// Takes bytes as they were read; what they completed comes back as events, in order. A
    /// line longer than `maxLineBytes` loses the framing: the connection must be closed.
    public mutating func receive(_ bytes: UnsafeRawBufferPointer) throws(LineFramer.Failure) -> [Event] {
        var lines: [ArraySlice<UInt8>] = []
        try framer.feed(bytes) { lines.append($0) }
        var events: [Event] = []
        for line in lines { take(line, into: &events) }
        return events
    }

    public mutating func receive(_ bytes: [UInt8]) throws(LineFramer.Failure) -> [Event] {
        var result: Result<[Event], LineFramer.Failure> = .success([])
        bytes.withUnsafeBytes { raw in
            do throws(LineFramer.Failure) { result = .success(try receive(raw)) } catch { result = .failure(error) }
        }
        return try result.get()
    }

    private mutating func take(_ line: ArraySlice<UInt8>, into events: inout [Event]) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        if !wantEncoded.isEmpty, let (id, result) = EncodedAnswer.peek(line), wantEncoded.contains(id) {
            wantEncoded.remove(id)
            waiting.remove(id)
            let base = line.startIndex
            events.append(.encodedAnswer(id: id, EncodedAnswer(line: Array(line), result: (result.lowerBound - base)..<(result.upperBound - base))))
            return
        }
        switch RPC.parse(line) {
        case .success(.notification(let method, let params)):
            if let notification = ServerNotification(method: method, params: params) { events.append(.notification(notification)) }
        case .success(.response(let id, let result)):
            if let id = id.int, waiting.remove(id) != nil {
                events.append(.answer(id: id, result: .success(result)))
            } else {
                ignoredLines += 1
            }
        case .success(.errorResponse(let id, let error)):
            if let number = id.int, waiting.remove(number) != nil {
                wantEncoded.remove(number)
                events.append(.answer(id: number, result: .failure(error)))
            } else if id.isNull {
                events.append(.fatal(error))
            } else {
                ignoredLines += 1
            }
        case .success(.request(let id, let method, _)):
            events.append(.send(RPC.response(id: id, error: RPCError(code: RPCError.methodNotFound, message: "method not found: \(method)"))))
        case .failure:
            // Not a frame we can use; the protocol gives us no way to complain.
            ignoredLines += 1
        }
    }

    /// An answer whose result is not what its method's typed call reads.
    public struct UnreadableAnswer: Error, Equatable, Sendable, CustomStringConvertible {
        public var method: RPCMethod
        /// The field's error, as `RPCFields` words it.
        public var problem: RPCError
        public var description: String { "the answer to \(method.rawValue) is not one this client reads: \(problem.message)" }
    }

    /// A method's typed result, read from its answer.
    public static func decode<Call: RPCCall>(_: Call.Type, _ result: JSON) throws(UnreadableAnswer) -> Call.Result {
        do throws(RPCError) {
            return try Call.Result(decoding: result)
        } catch {
            throw UnreadableAnswer(method: Call.method, problem: error)
        }
    }
}

/// Reading a file back with `attachment.get`, one piece after another: each piece must start
/// where the last ended, describe the same file, and not go past its size; the last must make
/// it whole. The client's `confab attachment` and the gateway's downloads share it.
public struct AttachmentAssembly: Sendable {
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// A piece that is not the next one: its offset is not where the bytes so far end.
        case wrongOffset(expected: Int, got: Int)
        /// A piece describing another file than the pieces before, or one no file may be.
        case otherFile
        /// Data that is not base64, or that goes past the file's size.
        case badData
        /// The last piece left the file short.
        case short(expected: Int, got: Int)
        /// More pieces than the file's size allows, or an empty one with more to come.
        case tooManyPieces

        public var description: String {
            switch self {
            case .wrongOffset(let expected, let got): "a piece at offset \(got) where \(expected) was next"
            case .otherFile: "a piece of another file"
            case .badData: "a piece that does not fit the file"
            case .short(let expected, let got): "the file ended at \(got) of its \(expected) bytes"
            case .tooManyPieces: "more pieces than the file can have"
            }
        }
    }

    public private(set) var bytes: [UInt8] = []
    public private(set) var attachment: Attachment?
    public private(set) var isComplete = false
    private let maxBytes: Int
    private var pieces = 0

    /// `maxBytes`: the largest file accepted (the largest an attachment may be).
    public init(maxBytes: Int = AttachmentLimits.maxImageBytes) {
        self.maxBytes = maxBytes
    }

    /// The params of the next request.
    public func nextParams(conversation: String, message: String, index: Int) -> AttachmentGetParams {
        AttachmentGetParams(conversation: conversation, message: message, index: index, offset: bytes.count)
    }

    /// Takes one answer. True when the file is whole.
    @discardableResult
    public mutating func take(_ piece: AttachmentGetResult) throws(Failure) -> Bool {
        precondition(!isComplete, "the file is whole already")
        guard piece.offset == bytes.count else { throw .wrongOffset(expected: bytes.count, got: piece.offset) }
        let described = piece.attachment
        guard described.size >= 0, described.size <= maxBytes, attachment == nil || attachment == described else { throw .otherFile }
        guard let data = Base64.decode(piece.data), bytes.count + data.count <= described.size else { throw .badData }
        pieces += 1
        // Every piece but the last is a whole chunk, so this many cover the largest file.
        guard pieces <= maxBytes / AttachmentLimits.maxChunkBytes + 2 else { throw .tooManyPieces }
        attachment = described
        bytes += data
        if !piece.more {
            guard bytes.count == described.size else { throw .short(expected: described.size, got: bytes.count) }
            isComplete = true
            return true
        }
        if data.isEmpty { throw .tooManyPieces }
        return false
    }
}
