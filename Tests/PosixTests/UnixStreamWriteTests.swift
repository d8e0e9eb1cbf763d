import EventLoop
import Posix
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `UnixStream.write` hands the socket what it takes at once and queues the rest in libuv.
final class UnixStreamWriteTests: XCTestCase {
    private var path = ""

    override func setUp() {
        signal(SIGPIPE, SIG_IGN)
        path = "/tmp/confab-stream-\(getpid())-\(name.hashValue & 0xFFFF).sock"
        unlink(path)
    }

    override func tearDown() { unlink(path) }

    /// A server stream accepted from `loop` and the client's plain, non-blocking descriptor.
    private func connectedPair(_ loop: Loop) throws -> (UnixStream, Int32, UnixListener) {
        let listener = try UnixListener(loop: loop)
        try listener.bind(path: path)
        var accepted: UnixStream?
        try listener.listen { _ in accepted = try? listener.accept() }
        let client = try UnixSocket.connect(to: path)
        XCTAssertEqual(fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK), 0)
        let deadline = Date().addingTimeInterval(5)
        while accepted == nil, Date() < deadline { _ = loop.runOnce(wait: false) }
        return (try XCTUnwrap(accepted), client, listener)
    }

    /// Frames of sizes 1 to 5,000 bytes, each byte telling its frame and position apart.
    private func frames(count: Int, seed: Int) -> [[UInt8]] {
        (0..<count).map { index in
            let size = 1 + (index &* 7919 &+ seed) % 5000
            return (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &+ seed) }
        }
    }

    func testWritesArriveWholeAndInOrderWhetherTheSocketTakesThemAtOnceOrNot() throws {
        let loop = try Loop()
        let (stream, client, listener) = try connectedPair(loop)
        defer { close(client) }
        var expected: [UInt8] = []
        var failures: [UVError] = []

        // Small: the socket takes it all in the call, nothing is queued.
        let small = frames(count: 5, seed: 1)
        XCTAssertNil(stream.write(small.map(OutboundBuffer.init), onFailure: { failures.append($0) }))
        expected += small.joined()
        XCTAssertEqual(stream.writeQueueSize, 0)

        // About 1.5 MB with the peer not reading: taken in part, the rest queued from inside a frame.
        let big = frames(count: 600, seed: 2)
        XCTAssertNil(stream.write(big.map(OutboundBuffer.init), onFailure: { failures.append($0) }))
        expected += big.joined()
        let queued = stream.writeQueueSize
        XCTAssertGreaterThan(queued, 0, "the socket cannot take 1.5 MB at once")
        XCTAssertLessThan(queued, big.joined().count, "the socket took some of it at once")

        // Written while the rest waits: it goes after, not into the socket first.
        let after = frames(count: 3, seed: 3)
        XCTAssertNil(stream.write(after.map(OutboundBuffer.init), onFailure: { failures.append($0) }))
        expected += after.joined()
        XCTAssertEqual(stream.writeQueueSize, queued + after.joined().count)

        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        let deadline = Date().addingTimeInterval(20)
        while received.count < expected.count, Date() < deadline {
            _ = loop.runOnce(wait: false)
            let count = read(client, &chunk, chunk.count)
            if count > 0 { received += chunk[0..<count] }
        }
        XCTAssertEqual(received.count, expected.count)
        XCTAssertTrue(received == expected, "the bytes arrived changed or out of order")
        XCTAssertEqual(stream.writeQueueSize, 0)
        XCTAssertEqual(failures, [])
        stream.close()
        listener.close()
        _ = loop.runOnce(wait: false)
    }

    /// A failure at once is returned; one of the queued rest reaches `onFailure`.
    func testAFailureIsReturnedOrReportedForTheQueuedRest() throws {
        let loop = try Loop()
        let (stream, client, listener) = try connectedPair(loop)
        var failures: [UVError] = []
        XCTAssertNil(stream.write(frames(count: 600, seed: 4).map(OutboundBuffer.init), onFailure: { failures.append($0) }))
        XCTAssertGreaterThan(stream.writeQueueSize, 0)
        close(client)
        let deadline = Date().addingTimeInterval(10)
        while failures.isEmpty, Date() < deadline { _ = loop.runOnce(wait: false) }
        XCTAssertEqual(failures.count, 1, "the queued rest could not be written: reported once")
        XCTAssertNotNil(stream.write([OutboundBuffer([1, 2, 3])]), "a write to a closed peer fails at once")
        stream.close()
        listener.close()
        _ = loop.runOnce(wait: false)
    }
}
