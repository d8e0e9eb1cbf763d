import XCTest

import Config
import DaemonSettings
#if canImport(Glibc)
import Glibc
#endif

final class SettingsTests: XCTestCase {
    func testTheREADMEExampleLoads() throws {
        let settings = try load("""
            [upstream]
            base_url = "http://127.0.0.1:8080/v1"
            model = "gpt-4o-mini"
            api_key = "sk-test"
            timeout_seconds = 60
            connect_timeout_seconds = 10
            max_retries = 2
            temperature = 0.7
            max_tokens = 1024

            [limits]
            max_line_bytes = 4194304
            max_client_buffer_bytes = 16777216
            max_clients = 256
            max_queued_sends = 16
            max_streams = 16

            [storage]
            fsync = false

            [access]
            allow_uids = [1001, 1002]
            """)
        XCTAssertEqual(settings.upstream.baseURL, "http://127.0.0.1:8080/v1")
        XCTAssertEqual(settings.upstream.apiKey, "sk-test")
        XCTAssertEqual(settings.upstream.temperature, 0.7)
        XCTAssertEqual(settings.upstream.maxTokens, 1024)
        XCTAssertEqual(settings.upstream.maxRetries, 2)
        XCTAssertEqual(settings.limits.maxStreams, 16)
        XCTAssertFalse(settings.fsync)
        XCTAssertEqual(settings.allowedUIDs, [1001, 1002])
    }

    func testAnEmptyFileGivesTheDefaults() throws {
        let settings = try load("")
        XCTAssertEqual(settings.upstream.baseURL, "https://api.openai.com/v1")
        XCTAssertNil(settings.upstream.temperature)
        XCTAssertTrue(settings.fsync)
        XCTAssertTrue(settings.allowedUIDs.isEmpty)
    }

    /// An integer is a number: `temperature = 0` was refused as "wrong type or value".
    func testAnIntegerIsAcceptedWhereANumberIs() throws {
        XCTAssertEqual(try load("[upstream]\ntemperature = 0\n").upstream.temperature, 0)
        XCTAssertEqual(try load("[upstream]\ntemperature = 1\n").upstream.temperature, 1)
        XCTAssertEqual(try load("[upstream]\ntemperature = 0.0\n").upstream.temperature, 0)
    }

    func testAWrongTypeSaysWhatWasExpectedAndWhere() {
        assertRejected("[upstream]\nmodel = \"m\"\ntemperature = \"hot\"\n",
                       "config.toml: line 3: upstream.temperature must be a number, not a string")
        assertRejected("[upstream]\ntimeout_seconds = 1.5\n",
                       "config.toml: line 2: upstream.timeout_seconds must be an integer, not a float")
        assertRejected("[upstream]\nmodel = 4\n",
                       "config.toml: line 2: upstream.model must be a string, not an integer")
        assertRejected("[storage]\nfsync = \"yes\"\n",
                       "config.toml: line 2: storage.fsync must be true or false, not a string")
        assertRejected("[access]\nallow_uids = 1000\n",
                       "config.toml: line 2: access.allow_uids must be an array of integers, not an integer")
        assertRejected("[access]\nallow_uids = [1000, \"bob\"]\n",
                       "config.toml: line 2: access.allow_uids must be an array of integers, not one holding a string")
        assertRejected("upstream = \"x\"\n",
                       "config.toml: line 1: upstream must be a table, not a string")
        assertRejected("[upstream]\ntemperature = nan\n",
                       "config.toml: line 2: upstream.temperature must be a finite number")
    }

    func testUnknownKeysAreErrorsNamingEveryOneWithItsLine() {
        assertRejected("[upstream]\ntemprature = 0.5\n", "config.toml: unknown keys: upstream.temprature (line 2; did you mean upstream.temperature?)")
        // storage.fsync is in the file already: no suggestion of it for storage.sync.
        assertRejected("[upstream]\nmodel = \"m\"\n[limit]\nmax_clients = 3\n[storage]\nfsync = true\nsync = false\n",
                       "config.toml: unknown keys: limit (line 3; did you mean limits?), storage.sync (line 7)")
        assertRejected("[upstream.extra]\nx = 1\n", "config.toml: unknown keys: upstream.extra (line 1)")
        // Control characters in a key are shown escaped, never raw.
        assertRejected("[upstream]\n\"a\\u001b[31m\" = 1\n", "config.toml: unknown keys: upstream.\"a\\u{1B}[31m\" (line 2)")
    }

    func testSyntaxErrorsKeepTheirLineNumber() {
        XCTAssertThrowsError(try load("[upstream]\nmodel = \"m\"\nmodel = \"n\"\n")) { error in
            let text = "\(error)"
            XCTAssertTrue(text.hasPrefix("config.toml: line 3: "), text)
        }
    }

    func testValuesAreChecked() {
        // [upstream]'s errors name their line, as [providers.NAME]'s do (the provider reader's).
        assertRejected("[upstream]\ntimeout_seconds = 0\n", "config.toml: line 2: upstream.timeout_seconds must be positive")
        assertRejected("[upstream]\nmax_retries = 11\n", "config.toml: line 2: upstream.max_retries must be between 0 and 10")
        assertRejected("[limits]\nmax_clients = -1\n", "config.toml: line 2: limits.max_clients must be positive")
        assertRejected("[upstream]\nbase_url = \"ftp://x\"\n", "config.toml: line 2: upstream.base_url must start with http:// or https://")
    }

    func testTheEnvironmentFillsWhatTheFileLeavesOut() throws {
        let environment = ["OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "OPENAI_API_KEY": "sk-env"]
        let fromEnvironment = try load("", environment: environment)
        XCTAssertEqual(fromEnvironment.upstream.baseURL, "http://127.0.0.1:1/v1")
        XCTAssertEqual(fromEnvironment.upstream.apiKey, "sk-env")
        let fromFile = try load("[upstream]\nbase_url = \"http://127.0.0.1:2/v1\"\napi_key = \"sk-file\"\n", environment: environment)
        XCTAssertEqual(fromFile.upstream.baseURL, "http://127.0.0.1:2/v1")
        XCTAssertEqual(fromFile.upstream.apiKey, "sk-file")
    }

    private func write(_ text: String, to path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == bytes.count
    }

    func testAKeyFileIsReadAndTrimmed() throws {
        let path = "/tmp/confab-config-test-\(getpid())"
        XCTAssertTrue(write(" sk-from-file \n", to: path))
        defer { unlink(path) }
        chmod(path, 0o600)
        let settings = try load("[upstream]\napi_key_file = \"\(path)\"\n", environment: ["OPENAI_API_KEY": "sk-env"])
        XCTAssertEqual(settings.upstream.apiKey, "sk-from-file")
        XCTAssertTrue(settings.warnings.isEmpty, "\(settings.warnings)")
    }

    /// A misspelt key names what it probably meant: a key the same table reads and the file
    /// lacks, within one edit for short keys and two for longer ones; nothing when none is near.
    func testAnUnknownKeyNamesTheKeyItProbablyMeant() {
        assertRejected("[upstream]\ntemprature = 0.5\n",
                       "config.toml: unknown keys: upstream.temprature (line 2; did you mean upstream.temperature?)")
        assertRejected("[storag]\nfsync = false\n", "config.toml: unknown keys: storag (line 1; did you mean storage?)")
        assertRejected("[profiles.p]\nsytem = \"x\"\n", "config.toml: unknown keys: profiles.p.sytem (line 2; did you mean profiles.p.system?)")
        assertRejected("[upstream]\nflavour = 1\n", "config.toml: unknown keys: upstream.flavour (line 2)")
    }
}
