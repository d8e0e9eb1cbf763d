import XCTest

import TOML

final class TOMLTests: XCTestCase {
    func testEveryKindOfValueComesThroughInDocumentOrder() throws {
        let document = try TOMLTable(parsing: """
            title = "confab"
            zeta = 1
            alpha = -2.5
            on = true
            when = 1979-05-27T07:32:00.25-08:00
            day = 1979-05-27
            local = 1979-05-27T00:32:00
            clock = 07:32:00
            utc = 1979-05-27T07:32:00Z
            list = [1, "two", [3.0]]
            inline = { b = 1, a = "x" }

            [server]
            port = 8080
            """)
        XCTAssertEqual(document.keys, ["title", "zeta", "alpha", "on", "when", "day", "local", "clock", "utc", "list", "inline", "server"])
        XCTAssertEqual(document["title"], .string("confab"))
        XCTAssertEqual(document["zeta"], .integer(1))
        XCTAssertEqual(document["alpha"], .float(-2.5))
        XCTAssertEqual(document["on"], .boolean(true))
        XCTAssertEqual(document["when"], .dateTime("1979-05-27T07:32:00.25-08:00"))
        XCTAssertEqual(document["day"], .dateTime("1979-05-27"))
        XCTAssertEqual(document["local"], .dateTime("1979-05-27T00:32:00"))
        XCTAssertEqual(document["clock"], .dateTime("07:32:00"))
        XCTAssertEqual(document["utc"], .dateTime("1979-05-27T07:32:00Z"))
        XCTAssertEqual(document["list"], .array([.integer(1), .string("two"), .array([.float(3)])]))
        guard case .table(let inline) = document["inline"] else { return XCTFail("inline table") }
        XCTAssertEqual(inline.keys, ["b", "a"])
        guard case .table(let server) = document["server"] else { return XCTFail("table") }
        XCTAssertEqual(server["port"], .integer(8080))
        XCTAssertEqual(document.position(of: "zeta"), TOMLPosition(line: 2, column: 1))
        XCTAssertEqual(server.position(of: "port"), TOMLPosition(line: 14, column: 1))
    }

    func testArraysOfTablesAndInlineTablesNest() throws {
        let document = try TOMLTable(parsing: """
            [[tools]]
            name = "search"
            args = { query = { type = "string" } }

            [[tools]]
            name = "clock"
            [tools.limits]
            calls = 3
            """)
        guard case .array(let tools) = document["tools"], tools.count == 2,
              case .table(let first) = tools[0], case .table(let second) = tools[1] else {
            return XCTFail("two tables: \(document)")
        }
        XCTAssertEqual(first["name"], .string("search"))
        XCTAssertEqual(first["args"], .table(TOMLTable(members: [
            .init(key: "query", value: .table(TOMLTable(members: [
                .init(key: "type", value: .string("string"), position: TOMLPosition(line: 3, column: 20)),
            ])), position: TOMLPosition(line: 3, column: 10)),
        ])))
        XCTAssertEqual(second["name"], .string("clock"))
        guard case .table(let limits) = second["limits"] else { return XCTFail("sub-table") }
        XCTAssertEqual(limits["calls"], .integer(3))
    }

    func testStringsKeepEscapesNULAndUnicode() throws {
        let document = try TOMLTable(parsing: #"""
            a = "tab\there\u0000end"
            "key with spaces" = 'literal \n'
            "ünï" = """
            two
            lines"""
            """#)
        XCTAssertEqual(document["a"], .string("tab\there\u{0}end"))
        XCTAssertEqual(document["key with spaces"], .string("literal \\n"))
        XCTAssertEqual(document["ünï"], .string("two\nlines"))
    }

    func testAnEmptyDocumentIsAnEmptyTable() throws {
        XCTAssertEqual(try TOMLTable(parsing: ""), TOMLTable())
        XCTAssertEqual(try TOMLTable(parsing: "# only a comment\n\n"), TOMLTable())
    }

    func testSyntaxErrorsSayWhere() {
        let cases: [(String, Int)] = [
            ("a = 1\nb = \n", 2),
            ("[upstream]\nmodel = \"x\"\nmodel = \"y\"\n", 3),
            ("x = 99999999999999999999\n", 1),
            ("a = [1, 2,,]\n", 1),
            ("\n\n\n[unclosed\n", 4),
        ]
        for (text, line) in cases {
            XCTAssertThrowsError(try TOMLTable(parsing: text), text) { error in
                guard let error = error as? TOMLSyntaxError else { return XCTFail("\(error)") }
                XCTAssertEqual(error.position.line, line, "\(text): \(error)")
                XCTAssertFalse(error.message.isEmpty)
                XCTAssertTrue(error.description.hasPrefix("line \(line): "), error.description)
            }
        }
    }

    func testDeepNestingIsRefusedNotACrash() {
        let deep = "a = " + String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        XCTAssertThrowsError(try TOMLTable(parsing: deep))
    }
}
