import XCTest

import Config
import DaemonSettings

/// Every error about a value written in the file names the file and the line it is on.
final class ConfigErrorLinesTests: XCTestCase {
    /// One wrong value of each kind of table, and the line it is on.
    static let cases: [(text: String, line: Int)] = [
        ("[limits]\nmax_clients = 0\n", 2),
        ("[limits]\n\nmax_line_bytes = -5\n", 3),
        ("[limits]\nmax_streams = 0\n", 2),
        ("[limits]\nunload_idle_seconds = 0\n", 2),
        ("[limits]\nmax_unanswered_requests = 0\n", 2),
        ("[limits]\nmax_tool_rounds = 0\n", 2),
        ("[limits]\nmax_client_buffer_bytes = 0\n", 2),
        ("[limits]\nmax_queued_sends = 0\n", 2),
        ("[upstream]\nbase_url = \"ftp://x\"\n", 2),
        ("[upstream]\n\nbase_url = 3\n", 3),
        ("[upstream]\nmodel = \"two words\"\n", 2),
        ("[upstream]\ntimeout_seconds = 0\n", 2),
        ("[providers.p]\nbase_url = \"localhost\"\n", 2),
        ("[providers.p]\nbase_url = \"http://127.0.0.1:1\"\napi = \"soap\"\n", 3),
        ("[providers.p]\nbase_url = \"http://127.0.0.1:1\"\nmax_retries = 11\n", 3),
        ("[providers.p]\nbase_url = \"http://example.com\"\n", 1),
        ("[providers.p]\nbase_url = \"http://127.0.0.1:1\"\n[providers.p.headers]\n\"bad header\" = \"x\"\n", 4),
        ("default_provider = \"nope\"\n", 1),
        ("\ndefault_profile = \"nope\"\n", 2),
        ("[profiles.p]\nprovider = \"nope\"\n", 2),
        ("[profiles.p]\ntemperature = 9\n", 2),
        ("[profiles.\"bad name\"]\nmodel = \"m\"\n", 1),
        ("[access]\nallow_uids = [-1]\n", 2),
        ("[storage]\nfsync = \"yes\"\n", 2),
        ("[tools.t]\ndescription = \"d\"\n[tools.t.request]\nurl = \"nope\"\n", 4),
        ("[mcp.s]\ncommand = \"\"\n", 2),
        ("[web]\nlisten = 3\n", 2),
        ("[client]\n\nnotify = \"loud\"\n", 3),
        ("[client]\nnotify_idle_seconds = -1\n", 2),
        ("[upstream.prices.m]\ninput = -1\noutput = 1\n", 2),
    ]

    func testEveryValueErrorNamesTheFileAndLine() {
        for (text, line) in Self.cases {
            XCTAssertThrowsError(try load(text), text) { error in
                let description = (error as? ConfigError)?.description ?? "\(error)"
                XCTAssertTrue(description.hasPrefix("config.toml: line \(line): ") || description.hasPrefix("config.toml: web.")
                              && description.contains("(line \(line))"),
                              "\(text.debugDescription): \(description)")
            }
        }
    }
}
