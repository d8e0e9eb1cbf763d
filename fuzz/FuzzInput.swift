// What both libFuzzer harnesses share: how an input is cut into a line limit, chunk sizes
// and a byte stream (fuzz/README.md), and how an invariant fails. Compiled into each
// harness by scripts/fuzz.sh.

/// An input as the harnesses read it: byte 0 is a header, the next `header & 7` bytes are
/// chunk sizes (cycled; 0 means an empty feed), the rest is the byte stream. With no size
/// bytes (or only zeros) the stream is fed one byte at a time. Header bit 7 selects a 64-byte
/// line limit instead of 4096, so the line-too-long paths are reached cheaply.
struct Chunking {
    var limit: Int
    var sizes: [Int]
    var payload: ArraySlice<UInt8>

    init(_ data: UnsafeBufferPointer<UInt8>) {
        guard let header = data.first else {
            limit = 4096; sizes = [1]; payload = []
            return
        }
        limit = header & 0x80 != 0 ? 64 : 4096
        let count = min(Int(header & 7), data.count - 1)
        sizes = data[1..<(1 + count)].map { Int($0) }
        if sizes.allSatisfy({ $0 == 0 }) { sizes = [1] }
        payload = ArraySlice(data[(1 + count)...])
    }

    /// The payload cut into consecutive chunks whose sizes cycle through `sizes`.
    var chunks: [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        var start = payload.startIndex
        var index = 0
        while start < payload.endIndex {
            let size = sizes[index % sizes.count]
            index += 1
            let end = min(start + size, payload.endIndex)
            out.append(payload[start..<end])
            start = end
        }
        return out
    }
}

func check(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("invariant violated: \(message())") }
}
