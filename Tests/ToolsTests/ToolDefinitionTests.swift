import XCTest

import ConfabProtocol
import Tools

final class ToolDefinitionTests: XCTestCase {
    private let weatherParameters: JSON = [
        "type": "object",
        "properties": [
            "city": ["type": "string"],
            "units": ["type": "string", "enum": ["metric", "imperial"]],
            "days": ["type": "integer", "minimum": 1],
        ],
        "required": ["city"],
        "additionalProperties": false,
    ]

    private func tool(_ method: ToolHTTPMethod = .GET, url: String = "https://api.example.test/v1/weather",
                      parameters: JSON = ["type": "object"], headers: [ToolHeader] = []) -> ToolDefinition {
        ToolDefinition(name: "weather", description: "The weather", parameters: parameters, method: method, url: url, headers: headers)
    }

    private func argumentError(_ tool: ToolDefinition, _ text: String) -> String? {
        if case .failure(let error) = tool.validate(arguments: text) { return error.message }
        return nil
    }

    func testAPathPlaceholderCannotNameOrClimbOrRemoveASegment() {
        let detail = tool(url: "http://127.0.0.1:1/v1/tool/echo/api/items/{id}/detail?q={q}",
                          parameters: ["type": "object", "properties": ["id": ["type": "string"], "q": ["type": "string"]], "required": ["id", "q"]])
        XCTAssertEqual(argumentError(detail, #"{"id":"..","q":"x"}"#), #""id" must not be "." or "..", nor hold one between slashes: it fills a segment of the tool's URL path"#)
        XCTAssertEqual(argumentError(detail, #"{"id":".","q":"x"}"#), #""id" must not be "." or "..", nor hold one between slashes: it fills a segment of the tool's URL path"#)
        XCTAssertEqual(argumentError(detail, #"{"id":"","q":"x"}"#), #""id" must not be empty: it fills a segment of the tool's URL path"#)
        for climbing in ["../admin", "a/../../b", "..\\\\x", "x/."] {
            XCTAssertNotNil(argumentError(detail, #"{"id":"\#(climbing)","q":""}"#), climbing)
        }
        // A slash stays inside its segment, encoded; dots inside a part are only dots.
        guard case .success(let value) = detail.validate(arguments: #"{"id":"a/b...c","q":""}"#) else { return XCTFail("refused") }
        XCTAssertEqual(detail.httpRequest(arguments: value).url, "http://127.0.0.1:1/v1/tool/echo/api/items/a%2Fb...c/detail?q=")
        // A query placeholder may be empty or dots: it is no segment.
        XCTAssertNil(argumentError(detail, #"{"id":"7","q":".."}"#))
    }

    func testDefaults() {
        let plain = ToolDefinition(name: "t", description: "d", url: "https://example.test/")
        XCTAssertEqual(plain.method, .GET)
        XCTAssertEqual(plain.timeoutSeconds, 10)
        XCTAssertEqual(plain.maxResponseBytes, 65536)
        XCTAssertEqual(plain.approval, .never)
        XCTAssertEqual(plain.headers, [])
        XCTAssertEqual(plain.parameters, ["type": "object", "properties": [:]])
    }

    func testNames() {
        for name in ["a", "get_weather", "Get-Weather-2", String(repeating: "x", count: 64)] {
            XCTAssertTrue(ToolDefinition.isValidName(name), name)
        }
        for name in ["", String(repeating: "x", count: 65), "a b", "a.b", "wétter", "a/b", "a:b", "a\n"] {
            XCTAssertFalse(ToolDefinition.isValidName(name), name)
        }
    }

    func testDeclaration() {
        let weather = tool(parameters: weatherParameters)
        XCTAssertEqual(weather.declaration, ["name": "weather", "description": "The weather", "parameters": weatherParameters])
        XCTAssertEqual(tool().declaration.text, #"{"description":"The weather","name":"weather","parameters":{"type":"object"}}"#)
    }

    func testMethodsAndApprovals() {
        XCTAssertEqual(ToolHTTPMethod.allCases.map(\.rawValue), ["GET", "POST", "PUT", "PATCH", "DELETE"])
        XCTAssertEqual(ToolHTTPMethod.allCases.filter(\.sendsArgumentsInQuery), [.GET, .DELETE])
        XCTAssertEqual(ToolApproval(rawValue: "always"), .always)
        XCTAssertEqual(ToolApproval(rawValue: "never"), .never)
        XCTAssertNil(ToolApproval(rawValue: "sometimes"))
    }

    // MARK: - Arguments

    func testEmptyArgumentsAreAnEmptyObject() {
        let open = tool()
        for text in ["", " ", "\n\t \r\n"] {
            XCTAssertEqual(try open.validate(arguments: text).get(), [:], "\(text.debugDescription)")
        }
        XCTAssertEqual(argumentError(tool(parameters: weatherParameters), ""), "\"city\" is required")
    }

    func testValidArgumentsAreReturnedParsed() throws {
        let weather = tool(parameters: weatherParameters)
        XCTAssertEqual(try weather.validate(arguments: #" {"city": "Oslo", "days": 3.0} "#).get(), ["city": "Oslo", "days": 3])
    }

    func testArgumentsThatAreNotJSON() {
        let weather = tool(parameters: weatherParameters)
        for text in ["{", "{\"city\": }", "city=Oslo", "{'city': 'Oslo'}", "{\"a\": 1,}", "{} {}"] {
            let message = argumentError(weather, text) ?? ""
            XCTAssertTrue(message.hasPrefix("arguments are not JSON: "), "\(text): \(message)")
            XCTAssertTrue(message.contains(" at byte "), "\(text): \(message)")
        }
        XCTAssertEqual(argumentError(weather, "{"), "arguments are not JSON: unexpected end of input in an object at byte 1")
        XCTAssertEqual(argumentError(weather, "{} {}"), "arguments are not JSON: unexpected text after the value at byte 3")
    }

    func testArgumentsThatAreNotAnObject() {
        let weather = tool(parameters: weatherParameters)
        for text in ["[]", "[{\"city\": \"Oslo\"}]", "\"Oslo\"", "3", "null", "true"] {
            XCTAssertEqual(argumentError(weather, text), "arguments must be a JSON object", text)
        }
    }

    func testArgumentsAreCheckedAgainstTheSchema() {
        let weather = tool(parameters: weatherParameters)
        XCTAssertEqual(argumentError(weather, #"{"units": "metric"}"#), "\"city\" is required")
        XCTAssertEqual(argumentError(weather, #"{"city": "Oslo", "units": "kelvin"}"#), "\"units\" must be one of \"metric\", \"imperial\"")
        XCTAssertEqual(argumentError(weather, #"{"city": "Oslo", "days": 1.5}"#), "\"days\" must be an integer")
        XCTAssertEqual(argumentError(weather, #"{"city": "Oslo", "days": 0}"#), "\"days\" must be at least 1")
        XCTAssertEqual(argumentError(weather, #"{"city": "Oslo", "foo": 1}"#), "unknown argument \"foo\"")
        XCTAssertEqual(argumentError(weather, #"{"city": 7}"#), "\"city\" must be a string")
    }

    // MARK: - Requests

    func testPlaceholdersArePercentEncoded() {
        let lookup = tool(url: "https://example.test/v1/{city}/forecast", parameters: weatherParameters)
        let cases: [(JSON, String)] = [
            ("Oslo", "Oslo"),
            ("São Paulo", "S%C3%A3o%20Paulo"),
            ("a/b?c#d&e=f", "a%2Fb%3Fc%23d%26e%3Df"),
            ("-._~", "-._~"),
            ("!*'();:@+$,%[]", "%21%2A%27%28%29%3B%3A%40%2B%24%2C%25%5B%5D"),
            ("東京", "%E6%9D%B1%E4%BA%AC"),
            ("🌧", "%F0%9F%8C%A7"),
            ("{city}", "%7Bcity%7D"),
            ("..", ".."),
            ("", ""),
        ]
        for (value, encoded) in cases {
            XCTAssertEqual(lookup.httpRequest(arguments: ["city": value]).url, "https://example.test/v1/\(encoded)/forecast", "\(value)")
        }
    }

    func testPlaceholderValuesOfEveryType() {
        let lookup = tool(url: "https://example.test/{v}")
        let cases: [(JSON, String)] = [
            (3, "3"), (.double(3.0), "3"), (2.5, "2.5"), (-1, "-1"), (true, "true"), (false, "false"),
            (nil, ""), (["a", 1], "%5B%22a%22%2C1%5D"), (["k": "v"], "%7B%22k%22%3A%22v%22%7D"),
        ]
        for (value, encoded) in cases {
            XCTAssertEqual(lookup.httpRequest(arguments: ["v": value]).url, "https://example.test/\(encoded)", "\(value)")
        }
        XCTAssertEqual(lookup.httpRequest(arguments: [:]).url, "https://example.test/", "a missing argument fills nothing")
    }

    func testAPlaceholderMayBeUsedTwiceAndLeavesTheQuery() {
        let lookup = tool(url: "https://example.test/{a}/{b}/{a}")
        XCTAssertEqual(lookup.httpRequest(arguments: ["a": "x", "b": "y", "c": "z"]).url, "https://example.test/x/y/x?c=z")
    }

    func testTheQueryStringForGetAndDelete() {
        for method in [ToolHTTPMethod.GET, .DELETE] {
            let request = tool(method, url: "https://example.test/items/{id}").httpRequest(arguments: [
                "id": 7, "zeta": "last", "alpha": "a b&c", "count": 3, "ratio": 0.5, "on": true, "off": false,
                "gone": nil, "list": [1, "x"], "map": ["k": nil], "ünï": "ü",
            ])
            XCTAssertEqual(request.method, method)
            XCTAssertEqual(request.url, "https://example.test/items/7?alpha=a%20b%26c&count=3&list=%5B1%2C%22x%22%5D&map=%7B%22k%22%3Anull%7D"
                           + "&off=false&on=true&ratio=0.5&zeta=last&%C3%BCn%C3%AF=%C3%BC", "\(method)")
            XCTAssertNil(request.body)
            XCTAssertEqual(request.headers, [])
        }
    }

    func testTheQueryJoinsWhatTheURLAlreadyHas() {
        let cases: [(String, JSON, String)] = [
            ("https://example.test/s", ["q": "x"], "https://example.test/s?q=x"),
            ("https://example.test/s?", ["q": "x"], "https://example.test/s?q=x"),
            ("https://example.test/s?lang=en", ["q": "x"], "https://example.test/s?lang=en&q=x"),
            ("https://example.test/s?lang=en&", ["q": "x"], "https://example.test/s?lang=en&q=x"),
            ("https://example.test/s#top", ["q": "x"], "https://example.test/s?q=x#top"),
            ("https://example.test/s?a=1#top", ["q": "x"], "https://example.test/s?a=1&q=x#top"),
            ("https://example.test/s?a={a}", ["q": "x", "a": "?&"], "https://example.test/s?a=%3F%26&q=x"),
        ]
        for (url, arguments, expected) in cases {
            XCTAssertEqual(tool(url: url).httpRequest(arguments: arguments).url, expected, url)
        }
    }

    func testNoQueryWithoutArguments() {
        XCTAssertEqual(tool(url: "https://example.test/s").httpRequest(arguments: [:]).url, "https://example.test/s")
        XCTAssertEqual(tool(url: "https://example.test/s").httpRequest(arguments: ["gone": nil]).url, "https://example.test/s")
        XCTAssertEqual(tool(url: "https://example.test/{id}").httpRequest(arguments: ["id": "1"]).url, "https://example.test/1")
    }

    func testABodyForPostPutAndPatch() {
        for method in [ToolHTTPMethod.POST, .PUT, .PATCH] {
            let request = tool(method, url: "https://example.test/items/{id}?dry_run=1").httpRequest(arguments: [
                "id": "a/1", "title": "Ünïcode \"quoted\"", "count": 2, "tags": ["x"], "note": nil,
            ])
            XCTAssertEqual(request.method, method)
            XCTAssertEqual(request.url, "https://example.test/items/a%2F1?dry_run=1", "\(method): the body has the rest")
            XCTAssertEqual(request.body.map { String(decoding: $0, as: UTF8.self) },
                           #"{"count":2,"note":null,"tags":["x"],"title":"Ünïcode \"quoted\""}"#)
            XCTAssertEqual(request.headers, ["Content-Type: application/json"])
        }
        XCTAssertEqual(tool(.POST).httpRequest(arguments: [:]).body, Array("{}".utf8), "a body even with no arguments")
    }

    func testConfiguredHeadersComeFirstAndAConfiguredContentTypeWins() {
        let headers = [ToolHeader(name: "X-Team", value: "blue"), ToolHeader(name: "Authorization", value: "Bearer s3cret", isSecret: true)]
        XCTAssertEqual(tool(.GET, headers: headers).httpRequest(arguments: ["a": 1]).headers, ["X-Team: blue", "Authorization: Bearer s3cret"])
        XCTAssertEqual(tool(.POST, headers: headers).httpRequest(arguments: ["a": 1]).headers,
                       ["X-Team: blue", "Authorization: Bearer s3cret", "Content-Type: application/json"])
        let typed = headers + [ToolHeader(name: "content-type", value: "application/json; charset=utf-8")]
        XCTAssertEqual(tool(.PUT, headers: typed).httpRequest(arguments: [:]).headers,
                       ["X-Team: blue", "Authorization: Bearer s3cret", "content-type: application/json; charset=utf-8"])
    }

    // MARK: - Secrets

    func testSecretValuesAreNeverPrinted() {
        let secret = "Bearer s3cret-value"
        let header = ToolHeader(name: "Authorization", value: secret, isSecret: true)
        let plain = ToolHeader(name: "X-Team", value: "blue")
        let definition = tool(.POST, headers: [plain, header])
        let request = definition.httpRequest(arguments: ["q": 1])
        var dumped = ""
        dump(definition, to: &dumped)
        dump(request, to: &dumped)
        dump(header, to: &dumped)
        let printed = [
            "\(header)", String(reflecting: header), "\(definition)", String(reflecting: definition), "\([definition])",
            "\(request)", String(reflecting: request), "\(ToolTable([definition]))", "\(Optional(definition) as Any)", dumped,
        ]
        for text in printed {
            XCTAssertFalse(text.contains("s3cret"), text)
        }
        XCTAssertEqual("\(header)", "Authorization: (secret)")
        XCTAssertEqual("\(plain)", "X-Team: blue")
        XCTAssertEqual("\(request)", "POST https://api.example.test/v1/weather (headers: X-Team, Authorization, Content-Type) (body: 7 bytes)")
        // The request itself carries it, for the transport.
        XCTAssertTrue(request.headers.contains("Authorization: \(secret)"))
    }
}

final class ToolURLTemplateTests: XCTestCase {
    func testParts() {
        XCTAssertEqual(ToolURLTemplate.parts(of: "https://x.test/{a}/b{c}d"),
                       [.text("https://x.test/"), .placeholder("a"), .text("/b"), .placeholder("c"), .text("d")])
        XCTAssertEqual(ToolURLTemplate.parts(of: "{a}{b}"), [.placeholder("a"), .placeholder("b")])
        XCTAssertEqual(ToolURLTemplate.parts(of: "x{}y"), [.text("x{}y")])
        XCTAssertEqual(ToolURLTemplate.parts(of: "x{a{b}y"), [.text("x{a"), .placeholder("b"), .text("y")])
        XCTAssertEqual(ToolURLTemplate.parts(of: "x{a"), [.text("x{a")])
        XCTAssertEqual(ToolURLTemplate.parts(of: "x}a{b}"), [.text("x}a"), .placeholder("b")])
        XCTAssertEqual(ToolURLTemplate.parts(of: ""), [])
    }

    func testPlaceholders() {
        XCTAssertEqual(ToolURLTemplate.placeholders(in: "https://x.test/{a}/{b}?c={a}"), ["a", "b", "a"])
        XCTAssertEqual(ToolURLTemplate.placeholders(in: "https://x.test/"), [])
    }

    func testProblems() {
        for url in ["https://x.test", "http://x.test/{a}", "https://x.test:8443/a/{b}?c={d}#e", "http://127.0.0.1/", "https://x.test/ü"] {
            XCTAssertNil(ToolURLTemplate.problem(in: url), url)
        }
        let cases: [(String, String)] = [
            ("ftp://x.test/", "must start with http:// or https://"),
            ("HTTPS://x.test/", "must start with http:// or https://"),
            ("x.test/{a}", "must start with http:// or https://"),
            ("https://x.test/a b", "must not hold spaces or control characters"),
            ("https://x.test/a\tb", "must not hold spaces or control characters"),
            ("https://x.test/a\u{7F}", "must not hold spaces or control characters"),
            ("https://x.test/a\r\nX-Evil: 1", "must not hold spaces or control characters"),
            ("https://x.test/{}", "has a { or } that is not part of a {placeholder}"),
            ("https://x.test/{a", "has a { or } that is not part of a {placeholder}"),
            ("https://x.test/a}", "has a { or } that is not part of a {placeholder}"),
            ("https://x.test/{a{b}", "has a { or } that is not part of a {placeholder}"),
            ("https://", "must name a host"),
            ("https:///path", "must name a host"),
            ("https://{host}/path", "must not have a {placeholder} before its path: the model must not choose where requests go"),
            ("https://api.{region}.x.test/", "must not have a {placeholder} before its path: the model must not choose where requests go"),
            ("https://x.test:{port}/", "must not have a {placeholder} before its path: the model must not choose where requests go"),
            ("https://{user}@x.test/", "must not have a {placeholder} before its path: the model must not choose where requests go"),
        ]
        for (url, expected) in cases {
            XCTAssertEqual(ToolURLTemplate.problem(in: url), expected, url)
        }
    }

    func testPercentEncoding() {
        XCTAssertEqual(ToolURLTemplate.percentEncoded("AZaz09-._~"), "AZaz09-._~")
        XCTAssertEqual(ToolURLTemplate.percentEncoded(" \"%/:?#[]@!$&'()*+,;=\n"),
                       "%20%22%25%2F%3A%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D%0A")
        XCTAssertEqual(ToolURLTemplate.percentEncoded("é"), "%C3%A9")
        XCTAssertEqual(ToolURLTemplate.percentEncoded("e\u{301}"), "e%CC%81", "a combining accent is its own bytes")
        XCTAssertEqual(ToolURLTemplate.percentEncoded("\u{0}"), "%00")
    }
}

final class ToolTableTests: XCTestCase {
    func testLookupsAndOrder() {
        let b = ToolDefinition(name: "b", description: "B", url: "https://x.test/b")
        let a = ToolDefinition(name: "a", description: "A", url: "https://x.test/a")
        let table = ToolTable([b, a])
        XCTAssertEqual(table["a"], a)
        XCTAssertEqual(table["b"], b)
        XCTAssertNil(table["c"])
        XCTAssertEqual(table.sorted, [a, b])
        XCTAssertEqual(table.names, ["a", "b"])
        XCTAssertEqual(table.count, 2)
        XCTAssertFalse(table.isEmpty)
        XCTAssertTrue(ToolTable().isEmpty)
        XCTAssertEqual(ToolTable(), ToolTable([]))
        XCTAssertNotEqual(table, ToolTable([a]))
    }

    func testTheLastOfTwoWithOneNameWins() {
        let first = ToolDefinition(name: "a", description: "first", url: "https://x.test/1")
        let second = ToolDefinition(name: "a", description: "second", url: "https://x.test/2")
        XCTAssertEqual(ToolTable([first, second])["a"], second)
        XCTAssertEqual(ToolTable([first, second]).count, 1)
    }
}

final class ToolSecretRedactionTests: XCTestCase {
    func testSecretHeaderValuesAreRedactedFromText() {
        let tool = ToolDefinition(name: "t", description: "d", url: "https://example.invalid/x",
                                  headers: [ToolHeader(name: "X-Key", value: "k3y-value", isSecret: true),
                                            ToolHeader(name: "X-Plain", value: "plain-value"),
                                            ToolHeader(name: "X-Short", value: "abc", isSecret: true)])
        XCTAssertEqual(tool.redactingSecrets(#"{"x-key":"k3y-value","again":"k3y-valuek3y-value","x-plain":"plain-value"}"#),
                       #"{"x-key":"[secret]","again":"[secret][secret]","x-plain":"plain-value"}"#)
        XCTAssertEqual(tool.redactingSecrets("abc stays: too short to tell from ordinary text"), "abc stays: too short to tell from ordinary text")
        XCTAssertEqual(tool.redactingSecrets("héllo k3y-valu"), "héllo k3y-valu")
    }
}
