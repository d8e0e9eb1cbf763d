// Server-Sent Events parsing, following the WHATWG HTML "event stream interpretation" rules
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
//
// The parser is incremental: bytes are fed exactly as they arrive from the network, split
// anywhere (between CR and LF, in the middle of a UTF-8 sequence, in the middle of the BOM).
// Only the unterminated tail of the current line is buffered between feeds; complete lines
// are parsed straight out of the caller's buffer.

/// One dispatched Server-Sent Event.
public struct SSEEvent: Equatable, Sendable {
    /// The `event:` field; "message" when absent or empty.
    public var type: String
    /// The `data:` lines of the event joined with "\n".
    public var data: String
    /// The last `id:` field seen in this event (not carried over from earlier events), if any.
    public var id: String?

    public init(type: String = "message", data: String, id: String? = nil) {
        self.type = type
        self.data = data
        self.id = id
    }
}

/// One dispatched event as the parser hands it out, with its data borrowed from the parser's
/// buffer: valid only during the call it is passed to. (A streamed token is one event; its data
/// goes straight to the JSON reader, never through a `String`.)
public struct SSEEventView {
    /// The `event:` field; "message" when absent or empty.
    public let type: String
    /// The `data:` lines joined with "\n", as bytes (not checked as UTF-8: the JSON reader does).
    public let data: UnsafeRawBufferPointer
    public let id: String?

    public init(type: String, data: UnsafeRawBufferPointer, id: String?) {
        self.type = type
        self.data = data
        self.id = id
    }

    /// The data as text, invalid UTF-8 replaced (for the paths that are not a JSON chunk).
    public var dataText: String { String(decoding: data, as: UTF8.self) }
}

extension SSEEvent {
    /// The event lent out as a view, as the parser would pass it.
    public func withView<Result>(_ body: (SSEEventView) throws -> Result) rethrows -> Result {
        var bytes = Array(data.utf8)
        return try bytes.withUnsafeMutableBytes { try body(SSEEventView(type: type, data: UnsafeRawBufferPointer($0), id: id)) }
    }

    public init(_ view: SSEEventView) {
        self.init(type: view.type, data: view.dataText, id: view.id)
    }
}

public enum SSEError: Error, Equatable, Sendable {
    /// A single line (terminator excluded) was longer than `limit` bytes.
    case lineTooLong(limit: Int)
}

public struct SSEParser: Sendable {
    /// Longest accepted line in bytes, line terminator excluded.
    public let maxLineBytes: Int

    /// Unterminated tail of the current line, carried from one feed to the next.
    private var pending: [UInt8] = []
    /// The previous feed ended with CR: an LF at the start of the next feed belongs to it.
    private var skipLeadingLF = false
    /// Still looking at the first bytes of the stream (possible UTF-8 BOM).
    private var atStreamStart = true
    /// How many BOM bytes have been matched so far at stream start.
    private var bomMatched = 0

    // Event being assembled.
    private var eventType = ""
    private var dataBuffer: [UInt8] = []
    private var eventID: String?

    private static let lf: UInt8 = 0x0A
    private static let cr: UInt8 = 0x0D
    private static let colon: UInt8 = 0x3A
    private static let space: UInt8 = 0x20
    private static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
    /// Capacity above which the line/data buffers are released rather than kept for reuse.
    private static let retainedCapacity = 64 << 10

    public init(maxLineBytes: Int = 4 << 20) {
        self.maxLineBytes = maxLineBytes
    }

    /// Feed raw bytes exactly as they came off the wire (any split, even mid-UTF-8 or between CR and LF).
    /// Every event completed by these bytes is passed to `emit`, in order.
    /// Throws `SSEError.lineTooLong` as soon as the current line is known to exceed `maxLineBytes`;
    /// the parser is then reset (events already passed to `emit` stay delivered).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (SSEEventView) -> Void) throws {
        let count = bytes.count
        var i = 0
        if count == 0 { return }

        if atStreamStart {
            // Skip one UTF-8 BOM at the very start of the stream, even when split across feeds.
            while i < count && bomMatched < Self.bom.count {
                if bytes[i] == Self.bom[bomMatched] {
                    bomMatched += 1
                    i += 1
                } else {
                    break
                }
            }
            if bomMatched == Self.bom.count {
                atStreamStart = false
            } else if i == count {
                return  // everything so far is a BOM prefix: wait for more bytes
            } else {
                // Not a BOM after all: the matched bytes are ordinary line content.
                pending.append(contentsOf: Self.bom[0..<bomMatched])
                atStreamStart = false
            }
        }

        if skipLeadingLF && i < count {
            skipLeadingLF = false
            if bytes[i] == Self.lf { i += 1 }
        }

        var lineStart = i
        let base = bytes.baseAddress!
        while i < count {
            // Eight bytes at a time to the next CR or LF: a chunk line is a few hundred bytes.
            while i + 8 <= count {
                let found = Self.lineEnds(base + i)
                if found != 0 {
                    i += found.trailingZeroBitCount >> 3
                    break
                }
                i += 8
            }
            guard i < count else { break }
            let byte = bytes[i]
            if byte != Self.lf && byte != Self.cr {
                i += 1
                continue
            }
            try completeLine(bytes, from: lineStart, to: i, emit)
            if byte == Self.cr {
                if i + 1 < count {
                    if bytes[i + 1] == Self.lf { i += 1 }
                } else {
                    skipLeadingLF = true
                }
            }
            i += 1
            lineStart = i
        }

        if lineStart < count {
            let length = pending.count + (count - lineStart)
            if length > maxLineBytes { try fail() }
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[lineStart..<count]))
        }
    }

    /// The 8 bytes at `start` tested at once for CR or LF: zero when there is neither, else the
    /// lowest set bit is in the (little-endian) first of them. A byte equal to CR or LF becomes 0
    /// after the XOR; subtracting 1 sets its high bit (and a borrow can only start at a true
    /// find, so false ones come only after the first).
    @inline(__always)
    private static func lineEnds(_ start: UnsafeRawPointer) -> UInt64 {
        let word = UInt64(littleEndian: start.loadUnaligned(as: UInt64.self))
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let lfs = word ^ (ones &* UInt64(lf)), crs = word ^ (ones &* UInt64(cr))
        return ((lfs &- ones) & ~lfs | (crs &- ones) & ~crs) & highs
    }

    /// Convenience for tests and small inputs: returns the events completed by `bytes`.
    public mutating func feed(_ bytes: [UInt8]) throws -> [SSEEvent] {
        var events: [SSEEvent] = []
        try bytes.withUnsafeBytes { buffer in
            try self.feed(buffer) { events.append(SSEEvent($0)) }
        }
        return events
    }

    /// End of stream: an event not terminated by a blank line is dropped (WHATWG rule). Resets state,
    /// so the parser can be reused for a new stream.
    public mutating func finish() {
        pending = []
        skipLeadingLF = false
        atStreamStart = true
        bomMatched = 0
        eventType = ""
        dataBuffer = []
        eventID = nil
    }

    // MARK: - Lines

    private mutating func fail() throws -> Never {
        finish()
        throw SSEError.lineTooLong(limit: maxLineBytes)
    }

    /// A line terminator was found at `end`; the line is `pending` + `bytes[start..<end]`.
    private mutating func completeLine(
        _ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int, _ emit: (SSEEventView) -> Void
    ) throws {
        if pending.isEmpty {
            if end - start > maxLineBytes { try fail() }
            processLine(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), emit)
            return
        }
        if pending.count + (end - start) > maxLineBytes { try fail() }
        var line: [UInt8] = []
        swap(&line, &pending)
        line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
        line.withUnsafeBytes { processLine($0, emit) }
        if line.capacity <= Self.retainedCapacity {
            line.removeAll(keepingCapacity: true)
            swap(&line, &pending)
        }
    }

    private mutating func processLine(_ line: UnsafeRawBufferPointer, _ emit: (SSEEventView) -> Void) {
        if line.isEmpty {
            dispatch(emit)
            return
        }
        if line[0] == Self.colon { return }  // comment / keep-alive

        let name: UnsafeRawBufferPointer
        let value: UnsafeRawBufferPointer
        if let colonIndex = line.firstIndex(of: Self.colon) {
            name = UnsafeRawBufferPointer(rebasing: line[0..<colonIndex])
            var valueStart = colonIndex + 1
            if valueStart < line.count && line[valueStart] == Self.space { valueStart += 1 }
            value = UnsafeRawBufferPointer(rebasing: line[valueStart...])
        } else {
            name = line
            value = UnsafeRawBufferPointer(rebasing: line[line.count...])
        }

        switch name.count {
        case 4 where name.elementsEqual("data".utf8):
            dataBuffer.append(contentsOf: value)
            dataBuffer.append(Self.lf)
        case 5 where name.elementsEqual("event".utf8):
            eventType = String(decoding: value, as: UTF8.self)
        case 2 where name.elementsEqual("id".utf8):
            if !value.contains(0) {
                eventID = String(decoding: value, as: UTF8.self)
            }
        default:
            break  // `retry` and unknown fields are ignored
        }
    }

    private mutating func dispatch(_ emit: (SSEEventView) -> Void) {
        defer {
            eventType = ""
            eventID = nil
            if dataBuffer.capacity <= Self.retainedCapacity {
                dataBuffer.removeAll(keepingCapacity: true)
            } else {
                dataBuffer = []
            }
        }
        if dataBuffer.isEmpty { return }
        dataBuffer.removeLast()  // the "\n" appended after the last data line
        let type = eventType.isEmpty ? "message" : eventType
        dataBuffer.withUnsafeBytes { emit(SSEEventView(type: type, data: $0, id: eventID)) }
    }
}
