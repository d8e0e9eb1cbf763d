import XCTest

import Tools

final class ToolResponseTests: XCTestCase {
    private func content(_ body: [UInt8], status: Int = 200, total: Int? = nil, cap: Int) -> (String, Bool) {
        let result = ToolResponse.content(status: status, body: body, totalBytes: total ?? body.count, cap: cap)
        return (result.content, result.truncated)
    }

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    func testABodyWithinTheCapIsGivenWhole() {
        XCTAssertEqual(content(bytes("{\"temp\": 21}"), cap: 100).0, "{\"temp\": 21}")
        XCTAssertEqual(content(bytes("{\"temp\": 21}"), cap: 100).1, false)
        XCTAssertEqual(content(bytes("exact"), cap: 5).0, "exact", "exactly the cap is not cut")
        XCTAssertEqual(content(bytes("exact"), cap: 5).1, false)
        XCTAssertEqual(content([], cap: 5).0, "")
        XCTAssertEqual(content(bytes("Grüße, 東京 🌧"), cap: 100).0, "Grüße, 東京 🌧")
    }

    func testInvalidUTF8IsReplaced() {
        XCTAssertEqual(content([0x61, 0xFF, 0x62, 0xC3], cap: 100).0, "a\u{FFFD}b\u{FFFD}")
        XCTAssertEqual(content([0xED, 0xA0, 0x80], cap: 100).0.unicodeScalars.allSatisfy { $0 == "\u{FFFD}" }, true, "a surrogate is invalid")
    }

    func testALongerBodyIsCutAndSaysSo() {
        let (text, truncated) = content(bytes("hello world"), cap: 5)
        XCTAssertEqual(text, "hello\n[cut: the response was 11 bytes; the first 5 are shown]")
        XCTAssertTrue(truncated)
    }

    func testAKeyTheCutSplitsIsRedacted() {
        let secrets = SecretRedactor(secrets: ["sk-tool-secret-0123456789abcdefghij"])
        let body = bytes(String(repeating: "x", count: 270) + " key=sk-tool-secret-0123456789abcdefghij end")
        let cut = ToolResponse.content(status: 200, body: body, totalBytes: body.count, cap: 300, secrets: secrets)
        XCTAssertEqual(cut.content, String(repeating: "x", count: 270) + " key=[secret]\n[cut: the response was \(body.count) bytes; the first 300 are shown]")
        let whole = ToolResponse.content(status: 200, body: body, totalBytes: body.count, cap: 1000, secrets: secrets)
        XCTAssertEqual(whole.content, String(repeating: "x", count: 270) + " key=[secret] end")
    }

    func testACutNeverSplitsACharacter() {
        // "aé" is 61 C3 A9; "a€" is 61 E2 82 AC; "a🌧" is 61 F0 9F 8C A7.
        let cases: [(String, Int, String)] = [
            ("aéz", 2, "a"), ("aéz", 3, "aé"),
            ("a€z", 2, "a"), ("a€z", 3, "a"), ("a€z", 4, "a€"),
            ("a🌧z", 2, "a"), ("a🌧z", 3, "a"), ("a🌧z", 4, "a"), ("a🌧z", 5, "a🌧"),
            ("ééé", 1, ""), ("ééé", 5, "éé"),
        ]
        for (body, cap, shown) in cases {
            let count = body.utf8.count
            let (text, truncated) = content(bytes(body), cap: cap)
            XCTAssertEqual(text, "\(shown)\n[cut: the response was \(count) bytes; the first \(shown.utf8.count) are shown]", "\(body) at \(cap)")
            XCTAssertTrue(truncated)
        }
    }

    func testTheTotalIsWhatTheServerSent() {
        // The caller stopped reading after cap + 1 bytes of a longer answer.
        let (text, truncated) = content(bytes("abcdef"), total: 1_000_000, cap: 5)
        XCTAssertEqual(text, "abcde\n[cut: the response was 1000000 bytes; the first 5 are shown]")
        XCTAssertTrue(truncated)
        // ... or after exactly cap bytes: the body is still cut, since the server sent more.
        let (exact, cutToo) = content(bytes("abcde"), total: 6, cap: 5)
        XCTAssertEqual(exact, "abcde\n[cut: the response was 6 bytes; the first 5 are shown]")
        XCTAssertTrue(cutToo)
        // A character the reading stopped in the middle of is left out, not replaced.
        let (partial, _) = content(bytes("ab€").dropLast(1).map { $0 }, total: 50, cap: 4)
        XCTAssertEqual(partial, "ab\n[cut: the response was 50 bytes; the first 2 are shown]")
    }

    func testInvalidBytesAtTheCutAreCutAsTheyCome() {
        // Lone continuation bytes and bytes that start nothing are one byte each.
        XCTAssertEqual(content([0x61, 0xFF, 0xFF, 0x62], cap: 2).0, "a\u{FFFD}\n[cut: the response was 4 bytes; the first 2 are shown]")
        XCTAssertEqual(content([0x80, 0x80, 0x80, 0x80, 0x80, 0x61], cap: 5).0,
                       "\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\n[cut: the response was 6 bytes; the first 5 are shown]")
    }

    func testACapOfZero() {
        XCTAssertEqual(content(bytes("abc"), cap: 0).0, "\n[cut: the response was 3 bytes; the first 0 are shown]")
        XCTAssertEqual(content([], cap: 0).1, false)
    }

    func testAStatusOutsideTwoHundredsIsNamed() {
        for status in [200, 201, 204, 299] {
            XCTAssertEqual(content(bytes("ok"), status: status, cap: 10).0, "ok", "\(status)")
        }
        for status in [100, 199, 300, 304, 404, 500, 503] {
            XCTAssertEqual(content(bytes("no"), status: status, cap: 10).0, "HTTP \(status)\nno", "\(status)")
        }
        XCTAssertEqual(content([], status: 404, cap: 10).0, "HTTP 404\n")
        let (text, truncated) = content(bytes("internal error"), status: 500, cap: 8)
        XCTAssertEqual(text, "HTTP 500\ninternal\n[cut: the response was 14 bytes; the first 8 are shown]", "the cap counts the body only")
        XCTAssertTrue(truncated)
    }
}
