import XCTest

import Tools

final class SecretRedactorTests: XCTestCase {
    private let slashKey = "k3y/with/slash+plus=="
    private let quoteKey = "tok\"en-abc"
    private let apiKey = "sk-proj-abc123XYZ789"

    private var redactor: SecretRedactor { SecretRedactor(secrets: [slashKey, quoteKey, apiKey]) }

    /// Each payload must come out with no trace of a secret and with `[secret]` in its place.
    private func assertRedacted(_ payload: String, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(redactor.redacting(payload), expected, file: file, line: line)
    }

    func testRawForm() {
        assertRedacted("header was k3y/with/slash+plus== ok", "header was [secret] ok")
        assertRedacted(apiKey, "[secret]")
    }

    func testJSONEscapedForms() {
        assertRedacted(#"{"auth":"k3y\/with\/slash+plus=="}"#, #"{"auth":"[secret]"}"#)
        assertRedacted(#"{"auth":"tok\"en-abc"}"#, #"{"auth":"[secret]"}"#)
        // Every character as \u00XX, upper and lower case hex, mixed with plain ones.
        assertRedacted(#"{"a":"\u006b\u0033y\u002Fwith\u002fslash\u002bplus\u003d="}"#, #"{"a":"[secret]"}"#)
        assertRedacted(#"{"a":"tok\u0022en-abc"}"#, #"{"a":"[secret]"}"#)
        // JSON inside a JSON string: escaped twice.
        assertRedacted(#"{"body":"{\"h\":\"tok\\\"en-abc\"}"}"#, #"{"body":"{\"h\":\"[secret]\"}"}"#)
        assertRedacted(#"{"body":"k3y\\/with\\/slash+plus=="}"#, #"{"body":"[secret]"}"#)
    }

    func testPercentEncodedForms() {
        assertRedacted("GET /echo?key=k3y%2Fwith%2Fslash%2Bplus%3D%3D&x=1", "GET /echo?key=[secret]&x=1")
        assertRedacted("key=k3y%2fwith%2fslash%2bplus%3d%3d", "key=[secret]")
        assertRedacted("q=tok%22en-abc", "q=[secret]")
        // A form's `+` for a space.
        let spaced = SecretRedactor(secrets: ["pass phrase 42"])
        XCTAssertEqual(spaced.redacting("p=pass+phrase+42"), "p=[secret]")
    }

    func testBase64Forms() {
        // The secret alone, standard alphabet, padded.
        assertRedacted("azN5L3dpdGgvc2xhc2grcGx1cz09", "[secret]")
        // Inside Basic authentication (`user:` before it: another alignment).
        let basic = redactor.redacting("Authorization: Basic dXNlcjprM3kvd2l0aC9zbGFzaCtwbHVzPT0=")
        XCTAssertFalse(basic.contains("prM3kvd2l0aC9zbGFzaCtwbHVzPT"), basic)
        XCTAssertTrue(basic.contains("[secret]"), basic)
        // URL alphabet, the third alignment.
        let url = redactor.redacting("token=eHlrM3kvd2l0aC9zbGFzaCtwbHVzPT0")
        XCTAssertFalse(url.contains("rM3kvd2l0aC9zbGFzaCtwbHVzPT"), url)
        // Base64 of a JSON body holding the secret.
        let body = redactor.redacting("eyJoIjoiazN5L3dpdGgvc2xhc2grcGx1cz09In0=")
        XCTAssertFalse(body.contains("azN5L3dpdGgvc2xhc2grcGx1cz09"), body)
    }

    func testTheStartOfASecretAtACutIsRedacted() {
        let cut = redactor.redacting("401 filler key=sk-proj-abc1", cutAtEnd: true)
        XCTAssertEqual(cut, "401 filler key=[secret]")
        // An escape the cut split still counts.
        XCTAssertEqual(redactor.redacting(#"{"a":"k3y\/with\/sl\u00"#, cutAtEnd: true), #"{"a":"[secret]"#)
        XCTAssertEqual(redactor.redacting("key=k3y%2Fwith%2", cutAtEnd: true), "key=[secret]")
        // Fewer than eight characters of it are ordinary text; so is a text not cut.
        XCTAssertEqual(redactor.redacting("key=sk-proj", cutAtEnd: true), "key=sk-proj")
        XCTAssertEqual(redactor.redacting("key=sk-proj-abc1"), "key=sk-proj-abc1")
        XCTAssertEqual(redactor.redacting("key=sk-proj-abc1 and more", cutAtEnd: true), "key=sk-proj-abc1 and more")
        // A message cut to its limit ends with `…`.
        XCTAssertEqual(redactor.redactingMessage("Invalid key sk-proj-abc123X…"), "Invalid key [secret]…")
        XCTAssertEqual(redactor.redactingMessage("Invalid key sk-proj-abc123XYZ789 used"), "Invalid key [secret] used")
    }

    func testModelServerErrorBody() {
        let body = #"{"error":{"message":"Incorrect API key provided: sk-proj-abc123XYZ789. You can find your API key at the dashboard.","type":"invalid_request_error","code":"invalid_api_key"}}"#
        let redacted = redactor.redacting(body)
        XCTAssertFalse(redacted.contains("abc123XYZ789"), redacted)
        XCTAssertTrue(redacted.contains("Incorrect API key provided: [secret]. You can find"), redacted)
    }

    func testTokenOfAnAuthorizationValue() {
        let bearer = SecretRedactor(secrets: ["Bearer abcdefgh12345678"])
        XCTAssertEqual(bearer.redacting("you sent abcdefgh12345678"), "you sent [secret]")
        XCTAssertEqual(bearer.redacting("you sent Bearer abcdefgh12345678"), "you sent [secret]")
    }

    func testTheCredentialsOfBasicAuthentication() {
        // base64("ana:s3cr3t-pw") = YW5hOnMzY3IzdC1wdw==
        let basic = SecretRedactor(secrets: ["Basic YW5hOnMzY3IzdC1wdw=="])
        XCTAssertEqual(basic.redacting(#"{"user":"ana","password":"s3cr3t-pw"}"#), #"{"user":"ana","password":"[secret]"}"#)
        XCTAssertEqual(basic.redacting("auth ana:s3cr3t-pw"), "auth [secret]")
        XCTAssertEqual(basic.redacting("YW5hOnMzY3IzdC1wdw=="), "[secret]")
    }

    func testCharactersBeyondASCII() {
        let key = "pässwörd🔑key"
        let redactor = SecretRedactor(secrets: [key])
        XCTAssertEqual(redactor.redacting("x \(key) y"), "x [secret] y")
        XCTAssertEqual(redactor.redacting(#"{"k":"p\u00e4ssw\u00F6rd\ud83d\udd11key"}"#), #"{"k":"[secret]"}"#)
        XCTAssertEqual(redactor.redacting("k=p%C3%A4ssw%C3%B6rd%F0%9F%94%91key"), "k=[secret]")
    }

    func testTextWithoutSecretsIsUntouched() {
        let text = #"{"a":"k3y/with/slash+plus= (one = short)","b":"tok\"e","c":"%2F\u0041\\"}"#
        XCTAssertEqual(redactor.redacting(text), text)
        XCTAssertNil(redactor.redacting(Array(text.utf8)))
        XCTAssertEqual(SecretRedactor.none.redacting(apiKey), apiKey)
        XCTAssertTrue(SecretRedactor.none.isEmpty)
    }

    func testShortSecretsAreNotLookedFor() {
        let short = SecretRedactor(secrets: ["abc", "", "test", "sk-1234"])
        XCTAssertTrue(short.isEmpty)
        XCTAssertEqual(short.redacting("abc abc test sk-1234"), "abc abc test sk-1234")
    }

    func testEveryOccurrenceAndAdjacentOnes() {
        assertRedacted("\(apiKey)\(apiKey) and \(apiKey)", "[secret][secret] and [secret]")
    }

    func testToolDefinitionRedactsItsSecretHeadersInEveryEncoding() {
        let tool = ToolDefinition(name: "echo", description: "echo", url: "http://127.0.0.1/echo",
                                  headers: [ToolHeader(name: "X-Key", value: slashKey, isSecret: true),
                                            ToolHeader(name: "X-Plain", value: "visible-value")])
        XCTAssertEqual(tool.redactingSecrets(#"{"X-Key":"k3y\/with\/slash+plus==","X-Plain":"visible-value"}"#),
                       #"{"X-Key":"[secret]","X-Plain":"visible-value"}"#)
    }
}
