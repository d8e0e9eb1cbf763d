import ConfabProtocol
import Curl
import EventLoop
import Foundation
import MCP
import ServiceSettings
import XCTest

/// `MCPHTTPTransport` against a small scripted HTTP server on loopback.
final class MCPHTTPTransportTests: XCTestCase {
    /// Answers a POST with an event stream holding the response, then keeps the stream open,
    /// writing a comment every 50 ms, until the client closes it (it then writes `closed` to
    /// the marker directory) or a minute has passed.
    static let script = #"""
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
markers = sys.argv[1]
def mark(name, text):
    with open(os.path.join(markers, name + ".tmp"), "w") as f: f.write(text)
    os.replace(os.path.join(markers, name + ".tmp"), os.path.join(markers, name))
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        answer = {"jsonrpc": "2.0", "id": body["id"], "result": {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "open", "version": "0"}}}
        self.wfile.write(b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n")
        self.wfile.flush()
        try:
            for _ in range(1200):
                time.sleep(0.05)
                self.wfile.write(b": still here\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            mark("closed", "closed")
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
mark("port", str(server.server_address[1]))
server.serve_forever()
"""#

    func testAnEventStreamIsClosedOnceItsResponseHasCome() throws {
        let markers = NSTemporaryDirectory() + "confab-mcp-http-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: markers, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: markers) }
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", "-c", Self.script, markers]
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }
        func marker(_ name: String) -> String? { try? String(contentsOfFile: markers + "/" + name, encoding: .utf8) }
        let deadline = Date().addingTimeInterval(30)
        while marker("port") == nil, Date() < deadline { usleep(20_000) }
        let port = try XCTUnwrap(marker("port"))

        let loop = try Loop()
        let multi = CurlMulti(loop: loop)
        let transport = MCPHTTPTransport(endpoint: MCPHTTPEndpoint(url: "http://127.0.0.1:\(port)/mcp"), multi: multi,
                                         timeoutSeconds: 30) { _, _ in }
        var messages: [JSON] = []
        var failure: String?
        transport.onMessage = { messages.append((try? JSON.parse($0)) ?? .null) }
        transport.onFailure = { failure = $0 }
        transport.send(RPC.request(id: .int(1), method: "initialize", params: ["protocolVersion": "2025-06-18"]))
        func run(until done: () -> Bool) {
            let deadline = Date().addingTimeInterval(30)
            while !done(), Date() < deadline { _ = loop.runOnce(wait: false); usleep(1000) }
        }
        run { !messages.isEmpty || failure != nil }
        XCTAssertNil(failure)
        XCTAssertEqual(messages.first?["result"]?["serverInfo"]?["name"], "open")
        run { marker("closed") != nil }
        XCTAssertEqual(marker("closed"), "closed", "the stream was left open after its response")
        XCTAssertEqual(messages.count, 1)
        transport.close(endingSession: false)
        multi.close()
        loop.close()
    }
}
