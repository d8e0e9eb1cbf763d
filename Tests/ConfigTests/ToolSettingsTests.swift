import XCTest

import ConfabProtocol
import Config
import DaemonSettings
import Tools
#if canImport(Glibc)
import Glibc
#endif

final class ToolSettingsTests: XCTestCase {
    private var files: [String] = []

    override func tearDown() {
        for path in files { unlink(path) }
        files = []
        super.tearDown()
    }

    /// A file holding `text`, removed after the test.
    private func temporaryFile(_ name: String, _ text: String, mode: mode_t = 0o600) -> String {
        let path = "/tmp/confab-tool-test-\(getpid())-\(name)"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let bytes = Array(text.utf8)
        XCTAssertEqual(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }, bytes.count)
        close(fd)
        chmod(path, mode)
        files.append(path)
        return path
    }

    /// A tool with only what it needs, and `extra` lines in its request table.
    private func minimal(_ extra: String = "", parameters: String = "") -> String {
        """
        [tools.t]
        description = "A tool"
        \(parameters)
        [tools.t.request]
        url = "https://api.example.test/t"
        \(extra)
        """
    }

    func testEveryKey() throws {
        let tokenFile = temporaryFile("token", "file-secret\n\n")
        let settings = try load("""
            [tools.weather]
            description = "The weather forecast for a city"
            approval = "always"
            parameters = { type = "object", required = ["city"], additionalProperties = false, properties = { city = { type = "string", minLength = 1 }, days = { type = "integer", minimum = 1, maximum = 16 }, units = { type = "string", enum = ["metric", "imperial"] }, ratio = { type = "number", maximum = 2.5 }, verbose = { type = "boolean", default = false } } }

            [tools.weather.request]
            method = "post"
            url = "https://api.example.test/v1/{city}/forecast"
            headers = { "X-Team" = "blue", Accept = "application/json" }
            header_env = { Authorization = "WEATHER_TOKEN" }
            header_file = { "X-Api-Key" = "\(tokenFile)" }
            timeout_seconds = 30
            max_response_bytes = 1024
            """, environment: ["WEATHER_TOKEN": "Bearer env-secret"])
        let expected = ToolDefinition(
            name: "weather", description: "The weather forecast for a city",
            parameters: [
                "type": "object", "required": ["city"], "additionalProperties": false,
                "properties": [
                    "city": ["type": "string", "minLength": 1],
                    "days": ["type": "integer", "minimum": 1, "maximum": 16],
                    "units": ["type": "string", "enum": ["metric", "imperial"]],
                    "ratio": ["type": "number", "maximum": 2.5],
                    "verbose": ["type": "boolean", "default": false],
                ],
            ],
            method: .POST, url: "https://api.example.test/v1/{city}/forecast",
            headers: [
                ToolHeader(name: "X-Team", value: "blue"), ToolHeader(name: "Accept", value: "application/json"),
                ToolHeader(name: "Authorization", value: "Bearer env-secret", isSecret: true),
                ToolHeader(name: "X-Api-Key", value: "file-secret", isSecret: true),
            ],
            timeoutSeconds: 30, maxResponseBytes: 1024, approval: .always)
        XCTAssertEqual(settings.tools["weather"], expected)
        XCTAssertEqual(settings.tools.names, ["weather"])
        XCTAssertTrue(settings.warnings.isEmpty, "\(settings.warnings)")
    }

    func testDefaults() throws {
        let settings = try load(minimal())
        XCTAssertEqual(settings.tools["t"], ToolDefinition(
            name: "t", description: "A tool", parameters: ["type": "object", "properties": [:]], method: .GET,
            url: "https://api.example.test/t", headers: [], timeoutSeconds: 10, maxResponseBytes: 65536, approval: .never))
        XCTAssertTrue(try load("").tools.isEmpty)
    }

    func testSeveralToolsAndAnInlineRequest() throws {
        let settings = try load("""
            [tools.b]
            description = "B"
            request = { url = "http://127.0.0.1:9/b", method = "DELETE" }

            [tools.a-1_x]
            description = "A"
            approval = "never"
            [tools.a-1_x.request]
            url = "https://a.example.test/"
            """)
        XCTAssertEqual(settings.tools.sorted.map(\.name), ["a-1_x", "b"])
        XCTAssertEqual(settings.tools["b"]?.method, .DELETE)
        XCTAssertEqual(settings.tools["b"]?.url, "http://127.0.0.1:9/b")
        XCTAssertEqual(settings.tools["a-1_x"]?.approval, .never)
    }

    func testMethodsInAnyCase() throws {
        for (written, method) in [("get", ToolHTTPMethod.GET), ("Post", .POST), ("PUT", .PUT), ("patch", .PATCH), ("dElEtE", .DELETE)] {
            XCTAssertEqual(try load(minimal("method = \"\(written)\"")).tools["t"]?.method, method, written)
        }
        assertRejected(minimal("method = \"HEAD\""),
                       "config.toml: line 6: tools.t.request.method must be GET, POST, PUT, PATCH or DELETE, not \"HEAD\"")
    }

    // MARK: - Parameters

    func testParametersWrittenAsTables() throws {
        let settings = try load("""
            [tools.search]
            description = "Searches"

            [tools.search.parameters]
            type = "object"
            required = ["q"]

            [tools.search.parameters.properties.q]
            type = "string"
            description = "What to look for"

            [tools.search.parameters.properties.filters]
            type = "object"
            properties.tags = { type = "array", items = { type = "string" }, maxItems = 5 }
            properties.score = { type = ["number", "null"], minimum = -0.5 }

            [tools.search.request]
            url = "https://search.example.test/?q={q}"
            """)
        XCTAssertEqual(settings.tools["search"]?.parameters, [
            "type": "object",
            "required": ["q"],
            "properties": [
                "q": ["type": "string", "description": "What to look for"],
                "filters": [
                    "type": "object",
                    "properties": [
                        "tags": ["type": "array", "items": ["type": "string"], "maxItems": 5],
                        "score": ["type": ["number", "null"], "minimum": -0.5],
                    ],
                ],
            ],
        ])
    }

    func testArraysOfTablesAreArraysOfObjects() throws {
        let settings = try load(minimal(parameters: """
            parameters = { type = "object", properties = { x = { "x-examples" = [{ a = 1 }, [true, "s"]] } } }
            """))
        XCTAssertEqual(settings.tools["t"]?.parameters["properties"]?["x"], ["x-examples": [["a": 1], [true, "s"]]])
    }

    func testDatesAndTimesHaveNoJSONType() {
        assertRejected(minimal(parameters: """
            [tools.t.parameters]
            type = "object"
            [tools.t.parameters.properties.when]
            type = "string"
            default = 1979-05-27
            """), "config.toml: line 7: tools.t.parameters.properties.when.default is a date or time, which JSON has no type for: write it as a string")
        assertRejected(minimal(parameters: """
            parameters = { type = "object", properties = { at = { enum = ["now", 07:32:00] } } }
            """), "config.toml: line 3: tools.t.parameters.properties.at.enum[1] is a date or time, which JSON has no type for: write it as a string")
        assertRejected(minimal(parameters: """
            parameters = { type = "object", properties = { r = { maximum = inf } } }
            """), "config.toml: line 3: tools.t.parameters.properties.r.maximum must be a finite number")
    }

    func testAParametersSchemaThatIsNotUsable() {
        let cases: [(String, String)] = [
            (#"parameters = { type = "array" }"#, #"type must be "object" at the top level"#),
            (#"parameters = { properties = {} }"#, #"needs type "object" at the top level"#),
            (##"parameters = { type = "object", properties = { a = { "$ref" = "#/x" } } }"##,
             "properties.a.$ref is not supported: write the schema out in full"),
            (#"parameters = { type = "object", required = ["a"] }"#, #"required names "a", which is not one of properties"#),
            (#"parameters = { type = "object", properties = { a = { type = "date" } } }"#,
             #"properties.a.type must be one of object, array, string, number, integer, boolean, null, not "date""#),
        ]
        for (line, problem) in cases {
            assertRejected(minimal(parameters: line), "config.toml: line 3: tools.t.parameters is not a usable schema: \(problem)")
        }
        // Patterns run in linear time (RE2): what needs backtracking is refused, named.
        for (pattern, construct) in [(#"^(\\w)\\1$"#, #"a backreference (\1)"#), (#"^(?=.*[0-9])"#, "a lookahead (?=…)"),
                                     (#"(?<!x)y"#, "a negative lookbehind (?<!…)")] {
            assertRejected(minimal(parameters: #"parameters = { type = "object", properties = { a = { type = "string", pattern = ""# + pattern + #"" } } }"#),
                           "config.toml: line 3: tools.t.parameters is not a usable schema: properties.a.pattern uses \(construct), "
                           + "which confabd cannot match in linear time (RE2): write the pattern without it")
        }
        assertRejected(minimal(parameters: #"parameters = "{}""#), "config.toml: line 3: tools.t.parameters must be a table (a JSON Schema), not a string")
    }

    func testParametersFromAFile() throws {
        let schema = temporaryFile("schema.json", #"{"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}"#)
        let settings = try load(minimal(parameters: "parameters_file = \"\(schema)\""))
        XCTAssertEqual(settings.tools["t"]?.parameters, ["type": "object", "properties": ["q": ["type": "string"]], "required": ["q"]])

        assertRejected(minimal(parameters: "parameters_file = \"\(schema)\"\nparameters = { type = \"object\" }"),
                       "config.toml: line 3: tools.t.parameters_file cannot be given with parameters: the schema comes from one place")
        assertRejected(minimal(parameters: "parameters_file = \"/nonexistent/schema.json\""),
                       "config.toml: line 3: tools.t.parameters_file cannot be used: cannot read the schema file /nonexistent/schema.json: No such file or directory")
        let broken = temporaryFile("broken.json", #"{"type": "object",}"#)
        assertRejected(minimal(parameters: "parameters_file = \"\(broken)\""),
                       "config.toml: line 3: tools.t.parameters_file cannot be used: \(broken) holds invalid JSON: trailing comma at byte 18")
        let unusable = temporaryFile("unusable.json", ##"{"type": "object", "properties": {"a": {"$ref": "#/b"}}}"##)
        assertRejected(minimal(parameters: "parameters_file = \"\(unusable)\""),
                       "config.toml: line 3: tools.t.parameters_file names a file that is not a usable schema: properties.a.$ref is not supported: write the schema out in full")
    }

    // MARK: - The tool table

    func testNames() {
        for name in ["\"a b\"", "\"wétter\"", "\"a.b\"", String(repeating: "x", count: 65)] {
            assertRejected("[tools.\(name)]\ndescription = \"d\"\nrequest = { url = \"https://x.test/\" }",
                           "config.toml: line 1: tools.\(name.replacingQuotes) is not a tool name: 1 to 64 letters, digits, - or _")
        }
        XCTAssertNotNil(try? load("[tools.\(String(repeating: "x", count: 64))]\ndescription = \"d\"\nrequest = { url = \"https://x.test/\" }"))
    }

    func testDescriptionAndRequestAreRequired() {
        assertRejected("[tools.t]\nrequest = { url = \"https://x.test/\" }",
                       "config.toml: line 1: tools.t needs a description: it tells the model what the tool does")
        assertRejected("[tools.t]\ndescription = \" \"\nrequest = { url = \"https://x.test/\" }",
                       "config.toml: line 2: tools.t.description must not be empty")
        assertRejected("[tools.t]\ndescription = \"d\"", "config.toml: line 1: tools.t needs a request table with a url: [tools.t.request]")
        assertRejected("[tools.t]\ndescription = \"d\"\n[tools.t.request]\nmethod = \"GET\"", "config.toml: line 3: tools.t.request needs a url")
        assertRejected("[tools.t]\ndescription = \"d\"\nrequest = { method = \"GET\" }", "config.toml: line 3: tools.t.request needs a url")
    }

    func testApproval() throws {
        XCTAssertEqual(try load(minimal(parameters: "approval = \"always\"")).tools["t"]?.approval, .always)
        assertRejected(minimal(parameters: "approval = \"Always\""), "config.toml: line 3: tools.t.approval must be \"never\" or \"always\", not \"Always\"")
        assertRejected(minimal(parameters: "approval = \"ask\""), "config.toml: line 3: tools.t.approval must be \"never\" or \"always\", not \"ask\"")
    }

    func testWrongTypes() {
        let cases: [(String, String)] = [
            ("[tools.t]\ndescription = 1", "config.toml: line 2: tools.t.description must be a string, not an integer"),
            ("[tools.t]\ndescription = \"d\"\napproval = true", "config.toml: line 3: tools.t.approval must be a string, not a boolean"),
            ("[tools.t]\ndescription = \"d\"\nparameters_file = 1", "config.toml: line 3: tools.t.parameters_file must be a string, not an integer"),
            ("[tools.t]\ndescription = \"d\"\nrequest = \"https://x.test\"", "config.toml: line 3: tools.t.request must be a table, not a string"),
            ("tools = 1", "config.toml: line 1: tools must be a table, not an integer"),
            ("tools.t = 1", "config.toml: line 1: tools.t must be a table, not an integer"),
            (minimal("method = 1"), "config.toml: line 6: tools.t.request.method must be a string, not an integer"),
            (minimal("headers = \"X: y\""), "config.toml: line 6: tools.t.request.headers must be a table of strings, not a string"),
            (minimal("headers = { X = 1 }"), "config.toml: line 6: tools.t.request.headers.X must be a string, not an integer"),
            (minimal("header_env = { X = [\"A\"] }"), "config.toml: line 6: tools.t.request.header_env.X must be a string, not an array"),
            (minimal("header_file = [\"/x\"]"), "config.toml: line 6: tools.t.request.header_file must be a table of strings, not an array"),
            (minimal("timeout_seconds = \"10\""), "config.toml: line 6: tools.t.request.timeout_seconds must be an integer, not a string"),
            (minimal("max_response_bytes = 1.5"), "config.toml: line 6: tools.t.request.max_response_bytes must be an integer, not a float"),
        ]
        for (text, expected) in cases {
            assertRejected(text, expected)
        }
    }

    func testUnknownKeys() {
        assertRejected(minimal(parameters: "colour = \"red\""), "config.toml: unknown keys: tools.t.colour (line 3)")
        assertRejected(minimal("body = \"{}\"\nretries = 2"), "config.toml: unknown keys: tools.t.request.body (line 6), tools.t.request.retries (line 7)")
        assertRejected("[tools.t]\ndescription = \"d\"\nrequest = { url = \"https://x.test/\", timeout = 3 }",
                       "config.toml: unknown keys: tools.t.request.timeout (line 3)")
        // The schema is data: keys JSON Schema has that we do not use are not the config's unknown keys.
        XCTAssertNoThrow(try load(minimal(parameters: #"parameters = { type = "object", "x-whatever" = 1, pattern = "a" }"#)))
    }

    // MARK: - The request

    func testURLs() {
        let cases: [(String, String)] = [
            ("ftp://x.test/", "must start with http:// or https://"),
            ("x.test/t", "must start with http:// or https://"),
            ("https://x.test/a b", "must not hold spaces or control characters"),
            ("https://x.test/{a", "has a { or } that is not part of a {placeholder}"),
            ("https://x.test/{}", "has a { or } that is not part of a {placeholder}"),
            ("https:///t", "must name a host"),
            ("https://{host}/t", "must not have a {placeholder} before its path: the model must not choose where requests go"),
            ("https://x.test/{nope}", "has the placeholder {nope}, which is not a property of the parameters"),
            ("https://x.test/{city}?d={days}", "has the placeholder {days}, which the parameters do not list as required"),
        ]
        let parameters = #"parameters = { type = "object", required = ["city"], properties = { city = { type = "string" }, days = { type = "integer" } } }"#
        for (url, problem) in cases {
            assertRejected("[tools.t]\ndescription = \"d\"\n\(parameters)\n[tools.t.request]\nurl = \"\(url)\"",
                           "config.toml: line 5: tools.t.request.url \(problem)")
        }
        XCTAssertNoThrow(try load("[tools.t]\ndescription = \"d\"\n\(parameters)\n[tools.t.request]\nurl = \"https://x.test/{city}/{city}\""))
    }

    func testTimeoutAndResponseCap() throws {
        XCTAssertEqual(try load(minimal("timeout_seconds = 1")).tools["t"]?.timeoutSeconds, 1)
        XCTAssertEqual(try load(minimal("timeout_seconds = 300")).tools["t"]?.timeoutSeconds, 300)
        XCTAssertEqual(try load(minimal("max_response_bytes = 1")).tools["t"]?.maxResponseBytes, 1)
        XCTAssertEqual(try load(minimal("max_response_bytes = 16777216")).tools["t"]?.maxResponseBytes, 16_777_216)
        for value in [0, -1, 301] {
            assertRejected(minimal("timeout_seconds = \(value)"), "config.toml: line 6: tools.t.request.timeout_seconds must be between 1 and 300")
        }
        for value in [0, 16_777_217] {
            assertRejected(minimal("max_response_bytes = \(value)"), "config.toml: line 6: tools.t.request.max_response_bytes must be between 1 and 16777216")
        }
    }

    // MARK: - Headers

    func testHeaderNamesAndValues() {
        assertRejected(minimal("headers = { \"Bad Name\" = \"x\" }"), "config.toml: line 6: tools.t.request.headers.Bad Name is not an HTTP header name")
        assertRejected(minimal("headers = { \"X\" = \"a\\r\\nEvil: 1\" }"),
                       "config.toml: line 6: tools.t.request.headers.X must not hold line breaks or control characters")
        assertRejected(minimal("header_env = { \"X:\" = \"V\" }"), "config.toml: line 6: tools.t.request.header_env.X: is not an HTTP header name")
        assertRejected(minimal("header_file = { \"\" = \"/x\" }"), "config.toml: line 6: tools.t.request.header_file.\"\" is not an HTTP header name")
    }

    func testAHeaderComesFromOnePlace() {
        let file = temporaryFile("dup", "v")
        assertRejected(minimal("headers = { Authorization = \"a\" }\nheader_env = { authorization = \"TOKEN\" }"),
                       "config.toml: line 7: tools.t.request.header_env.authorization is given in headers too: a header comes from one place",
                       environment: ["TOKEN": "t"])
        assertRejected(minimal("header_env = { X-Key = \"TOKEN\" }\nheader_file = { X-KEY = \"\(file)\" }"),
                       "config.toml: line 7: tools.t.request.header_file.X-KEY is given in header_env too: a header comes from one place",
                       environment: ["TOKEN": "t"])
        assertRejected(minimal("headers = { X-A = \"1\", x-a = \"2\" }"),
                       "config.toml: line 6: tools.t.request.headers.x-a is given once more in headers: a header comes from one place")
    }

    func testHeaderEnv() throws {
        let settings = try load(minimal("header_env = { Authorization = \"TOKEN\" }"), environment: ["TOKEN": "Bearer tok"])
        XCTAssertEqual(settings.tools["t"]?.headers, [ToolHeader(name: "Authorization", value: "Bearer tok", isSecret: true)])
        assertRejected(minimal("header_env = { Authorization = \"TOKEN\" }"),
                       "config.toml: line 6: tools.t.request.header_env.Authorization names TOKEN, which is not set in confabd's environment")
        assertRejected(minimal("header_env = { Authorization = \"TOKEN\" }"),
                       "config.toml: line 6: tools.t.request.header_env.Authorization names TOKEN, which is not set in confabd's environment",
                       environment: ["TOKEN": ""])
        assertRejected(minimal("header_env = { Authorization = \"\" }"),
                       "config.toml: line 6: tools.t.request.header_env.Authorization must name an environment variable", environment: ["": "x"])
        assertRejected(minimal("header_env = { Authorization = \"TOKEN\" }"),
                       "config.toml: line 6: tools.t.request.header_env.Authorization names TOKEN, whose value holds line breaks or control characters",
                       environment: ["TOKEN": "secret-one\r\nX-Evil: 1"])
    }

    func testHeaderFile() throws {
        let crlf = temporaryFile("crlf", "file-token\r\n")
        let plain = temporaryFile("plain", "  spaced token  ")
        let settings = try load(minimal("header_file = { X-Token = \"\(crlf)\", X-Other = \"\(plain)\" }"))
        XCTAssertEqual(settings.tools["t"]?.headers, [
            ToolHeader(name: "X-Token", value: "file-token", isSecret: true),
            ToolHeader(name: "X-Other", value: "  spaced token  ", isSecret: true),
        ], "only the trailing line breaks go")
        XCTAssertTrue(settings.warnings.isEmpty, "\(settings.warnings)")

        assertRejected(minimal("header_file = { X-Token = \"/nonexistent/token\" }"),
                       "config.toml: line 6: tools.t.request.header_file.X-Token cannot be used: cannot read the header file /nonexistent/token: No such file or directory")
        let empty = temporaryFile("empty", "\n")
        assertRejected(minimal("header_file = { X-Token = \"\(empty)\" }"),
                       "config.toml: line 6: tools.t.request.header_file.X-Token names \(empty), which holds an empty value")
        let twoLines = temporaryFile("twolines", "secret-two\nX-Evil: 1\n")
        assertRejected(minimal("header_file = { X-Token = \"\(twoLines)\" }"),
                       "config.toml: line 6: tools.t.request.header_file.X-Token names \(twoLines), whose value holds line breaks or control characters")
    }

    func testAHeaderFileOthersCanReadIsWarnedAbout() throws {
        let open = temporaryFile("open", "tok\n", mode: 0o644)
        let settings = try load(minimal("header_file = { X-Token = \"\(open)\" }"))
        XCTAssertEqual(settings.warnings, ["the header file \(open) (tools.t.request.header_file.X-Token) can be read by others: chmod 600 \(open)"])
    }

    func testSecretsAreInNoMessage() throws {
        let secret = "s3cret-\(getpid())"
        let file = temporaryFile("secret", secret + "\u{7}\n")
        let cases: [(String, [String: String])] = [
            (minimal("header_env = { Authorization = \"TOKEN\" }"), ["TOKEN": secret + "\n"]),
            (minimal("header_file = { Authorization = \"\(file)\" }"), [:]),
            (minimal("header_env = { Authorization = \"TOKEN\" }\nheaders = { authorization = \"x\" }"), ["TOKEN": secret]),
        ]
        for (text, environment) in cases {
            XCTAssertThrowsError(try load(text, environment: environment)) { error in
                XCTAssertFalse("\(error)".contains(secret), "\(error)")
            }
        }
        // Printed settings (a log line, a test failure) hold no secret either.
        let good = temporaryFile("good", secret + "\n")
        let settings = try load(minimal("header_env = { Authorization = \"TOKEN\" }\nheader_file = { X-Key = \"\(good)\" }"),
                                environment: ["TOKEN": secret])
        var dumped = ""
        dump(settings.tools, to: &dumped)
        for text in ["\(settings.tools)", String(reflecting: settings.tools), "\(settings.tools.sorted)", dumped] {
            XCTAssertFalse(text.contains(secret), text)
        }
        XCTAssertEqual(settings.tools["t"]?.headers.map(\.value), [secret, secret])
    }

    func testAToolErrorFailsTheWholeLoadAsAReloadWould() {
        // SIGHUP keeps the old settings when load throws; a bad tool must make it throw.
        let path = temporaryFile("config.toml", "[tools.t]\ndescription = \"d\"\nrequest = { url = \"ftp://x\" }\n")
        XCTAssertThrowsError(try Settings.load(path: path, required: true, environment: [:])) { error in
            XCTAssertEqual((error as? ConfigError)?.description, "\(path): line 3: tools.t.request.url must start with http:// or https://")
        }
    }

    // MARK: - Profiles

    private let twoTools = """
        [tools.weather]
        description = "Weather"
        request = { url = "https://x.test/w" }
        [tools.search]
        description = "Search"
        request = { url = "https://x.test/s" }

        """

    func testProfilesListTools() throws {
        let settings = try load(twoTools + """
            [providers.claude]
            api = "anthropic"
            [profiles.a]
            tools = ["weather", "search"]
            [profiles.b]
            provider = "claude"
            tools = ["search"]
            [profiles.c]
            tools = []
            [profiles.d]
            """, environment: ["ANTHROPIC_API_KEY": "k"])
        XCTAssertEqual(settings.profileTable["a"]?.tools, ["weather", "search"])
        XCTAssertEqual(settings.profileTable["b"]?.tools, ["search"])
        XCTAssertEqual(settings.profileTable["c"]?.tools, [])
        XCTAssertEqual(settings.profileTable["d"]?.tools, [])
    }

    func testAProfileMayNameOnlyConfiguredToolsOnce() {
        assertRejected(twoTools + "[profiles.p]\ntools = [\"weather\", \"wether\"]",
                       "config.toml: line 8: profiles.p.tools names no configured tool: \"wether\" (there are: search, weather)")
        assertRejected("[profiles.p]\ntools = [\"weather\"]", "config.toml: line 2: profiles.p.tools names no configured tool: \"weather\" (there are none)")
        assertRejected(twoTools + "[profiles.p]\ntools = [\"weather\", \"search\", \"weather\"]",
                       "config.toml: line 8: profiles.p.tools names \"weather\" twice")
        assertRejected("[profiles.p]\ntools = \"weather\"", "config.toml: line 2: profiles.p.tools must be an array of strings, not a string")
        assertRejected("[profiles.p]\ntools = [1]", "config.toml: line 2: profiles.p.tools must be an array of strings, not one holding an integer")
    }

    func testTheCompletionsAPIHasNoToolCalls() throws {
        let legacy = twoTools + "[providers.legacy]\napi = \"completions\"\nbase_url = \"http://127.0.0.1:9/v1\"\n"
        assertRejected(legacy + "[profiles.p]\nprovider = \"legacy\"\ntools = [\"weather\"]",
                       "config.toml: line 12: profiles.p.tools cannot be used with provider \"legacy\": the completions API has no tool calls")
        XCTAssertEqual(try load(legacy + "[profiles.p]\nprovider = \"legacy\"\ntools = []").profileTable["p"]?.tools, [])
        // Through default_provider too.
        assertRejected("default_provider = \"legacy\"\n" + legacy + "[profiles.p]\ntools = [\"search\"]",
                       "config.toml: line 12: profiles.p.tools cannot be used with provider \"legacy\": the completions API has no tool calls")
    }

    // MARK: - Limits

    func testToolLimits() throws {
        let defaults = try load("")
        XCTAssertEqual(defaults.limits.maxToolRounds, 8)
        XCTAssertEqual(defaults.limits.toolApprovalTimeoutSeconds, 600)
        let set = try load("[limits]\nmax_tool_rounds = 100\ntool_approval_timeout_seconds = 86400")
        XCTAssertEqual(set.limits.maxToolRounds, 100)
        XCTAssertEqual(set.limits.toolApprovalTimeoutSeconds, 86400)
        let low = try load("[limits]\nmax_tool_rounds = 1\ntool_approval_timeout_seconds = 1")
        XCTAssertEqual(low.limits.maxToolRounds, 1)
        XCTAssertEqual(low.limits.toolApprovalTimeoutSeconds, 1)
        for value in [0, 101] {
            assertRejected("[limits]\nmax_clients = 3\nmax_tool_rounds = \(value)", "config.toml: line 3: limits.max_tool_rounds must be between 1 and 100")
        }
        for value in [0, 86401] {
            assertRejected("[limits]\ntool_approval_timeout_seconds = \(value)",
                           "config.toml: line 2: limits.tool_approval_timeout_seconds must be between 1 and 86400")
        }
        assertRejected("[limits]\nmax_tool_rounds = \"8\"", "config.toml: line 2: limits.max_tool_rounds must be an integer, not a string")
    }
}

private extension String {
    /// `[tools."a b"]`'s name as a message shows it: ConfigTable quotes only names that need it.
    var replacingQuotes: String {
        guard hasPrefix("\""), hasSuffix("\""), count >= 2 else { return self }
        let inner = String(dropFirst().dropLast())
        return inner.contains(".") ? self : inner
    }
}

final class ToolReadmeExampleTests: XCTestCase {
    /// The README's worked example, read from the README itself so the two cannot drift apart.
    func testTheREADMEToolsExampleLoads() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        let section = try XCTUnwrap(text.components(separatedBy: "### Tools").dropFirst().first)
        let example = try XCTUnwrap(section.components(separatedBy: "```toml\n").dropFirst().first?.components(separatedBy: "```").first)
        let settings = try Settings.load(text: example, path: "README.md", environment: ["TICKETS_TOKEN": "Bearer t0ken-from-env"])
        XCTAssertEqual(settings.tools.names, ["tickets", "weather"])
        let weather = try XCTUnwrap(settings.tools["weather"])
        XCTAssertEqual(weather.timeoutSeconds, 5)
        let request = weather.httpRequest(arguments: ["latitude": 38.72, "longitude": -9.14])
        XCTAssertEqual(request.url, "https://api.open-meteo.com/v1/forecast?current=temperature_2m,wind_speed_10m,weather_code&latitude=38.72&longitude=-9.14")
        if case .success = weather.validate(arguments: #"{"latitude": 95, "longitude": 0}"#) { XCTFail("latitude above 90 must be refused") }
        let tickets = try XCTUnwrap(settings.tools["tickets"])
        XCTAssertEqual(tickets.approval, .always)
        XCTAssertEqual(tickets.headers.first?.isSecret, true)
        XCTAssertEqual(tickets.httpRequest(arguments: ["query": "login fails", "state": "open"]).headers.first, "Authorization: Bearer t0ken-from-env")
        XCTAssertEqual(settings.profileTable["desk"]?.tools, ["weather", "tickets"])
    }
}
