import XCTest

import ConfabProtocol
import Tools

final class ToolSchemaProblemTests: XCTestCase {
    private func object(_ members: [String: JSON]) -> JSON { ["type": "object", "properties": .object(members)] }

    private func assertProblem(_ schema: JSON, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(ToolSchema.problem(in: schema), expected, file: file, line: line)
    }

    func testAFullSchemaIsUsable() {
        let schema: JSON = [
            "type": "object",
            "description": "ignored",
            "properties": [
                "city": ["type": "string", "minLength": 1, "maxLength": 100, "description": "the city"],
                "units": ["type": "string", "enum": ["metric", "imperial"], "default": "metric"],
                "days": ["type": "integer", "minimum": 1, "maximum": 16],
                "ratio": ["type": ["number", "null"], "minimum": 0.5, "maximum": 2.5],
                "when": ["type": "string", "format": "date"],
                "flag": ["type": "boolean"],
                "nothing": ["type": "null"],
                "filters": [
                    "type": "object",
                    "properties": ["tags": ["type": "array", "items": ["type": "string"], "minItems": 0, "maxItems": 5]],
                    "required": ["tags"],
                    "additionalProperties": false,
                ],
                "anything": [:],
            ],
            "required": ["city"],
            "additionalProperties": true,
        ]
        XCTAssertNil(ToolSchema.problem(in: schema))
        XCTAssertNil(ToolSchema.problem(in: ToolDefinition.noParameters))
        XCTAssertNil(ToolSchema.problem(in: ["type": "object"]), "properties may be left out")
    }

    func testTheTopLevelMustBeAnObjectSchema() {
        assertProblem("object", "must be a JSON object with type \"object\"")
        assertProblem([1], "must be a JSON object with type \"object\"")
        assertProblem([:], "needs type \"object\" at the top level")
        assertProblem(["properties": [:]], "needs type \"object\" at the top level")
        assertProblem(["type": "array"], "type must be \"object\" at the top level")
        assertProblem(["type": ["object", "null"]], "type must be \"object\" at the top level")
        assertProblem(["type": 1], "type must be \"object\" at the top level")
    }

    func testTypeNames() {
        for name in ToolSchema.typeNames {
            XCTAssertNil(ToolSchema.problem(in: object(["x": ["type": .string(name)]])), name)
        }
        XCTAssertNil(ToolSchema.problem(in: object(["x": ["type": ["string", "integer", "null"]]])))
        assertProblem(object(["x": ["type": "date"]]),
                      "properties.x.type must be one of object, array, string, number, integer, boolean, null, not \"date\"")
        assertProblem(object(["x": ["type": ["string", 3]]]),
                      "properties.x.type must be one of object, array, string, number, integer, boolean, null, not 3")
        assertProblem(object(["x": ["type": []]]), "properties.x.type must be a type name or a non-empty array of them")
        assertProblem(object(["x": ["type": true]]), "properties.x.type must be a type name or a non-empty array of them")
        assertProblem(object(["x": ["type": ["string", "string"]]]), "properties.x.type names \"string\" twice")
    }

    func testProperties() {
        assertProblem(["type": "object", "properties": []], "properties must be an object of schemas")
        assertProblem(object(["x": "string"]), "properties.x must be a schema (a JSON object)")
        assertProblem(object(["x": ["type": "object", "properties": ["y": ["type": "float"]]]]),
                      "properties.x.properties.y.type must be one of object, array, string, number, integer, boolean, null, not \"float\"")
        // Properties are checked in name order, so the first problem reported is always the same one.
        assertProblem(object(["b": ["type": "b"], "a": ["type": "a"]]),
                      "properties.a.type must be one of object, array, string, number, integer, boolean, null, not \"a\"")
    }

    func testOddPropertyNamesAreQuotedWithEscapes() {
        assertProblem(object(["a.b": ["type": "x"]]),
                      "properties.\"a.b\".type must be one of object, array, string, number, integer, boolean, null, not \"x\"")
        assertProblem(object(["\u{1B}[31m": ["$ref": "#"]]), "properties.\"\\u{1B}[31m\".$ref is not supported: write the schema out in full")
        assertProblem(object(["": ["$ref": "#"]]), "properties.\"\".$ref is not supported: write the schema out in full")
        assertProblem(object(["ok": ["x-\u{202E}": ["$ref": "#"]]]),
                      "properties.ok.\"x-\\u{202E}\".$ref is not supported: write the schema out in full")
    }

    func testRequired() {
        var schema = object(["city": ["type": "string"]])
        schema = schema.merging(["required": ["city"]])
        XCTAssertNil(ToolSchema.problem(in: schema))
        assertProblem(object([:]).merging(["required": "city"]), "required must be an array of property names")
        assertProblem(object(["city": [:]]).merging(["required": [1]]), "required must be an array of property names, not one holding 1")
        assertProblem(object(["city": [:]]).merging(["required": ["town"]]), "required names \"town\", which is not one of properties")
        assertProblem(["type": "object", "required": ["town"]], "required names \"town\", which is not one of properties")
        assertProblem(object(["city": [:]]).merging(["required": ["city", "city"]]), "required names \"city\" twice")
        assertProblem(object(["f": ["type": "object", "properties": ["a": [:]], "required": ["b"]]]),
                      "properties.f.required names \"b\", which is not one of properties.f.properties")
    }

    func testAdditionalProperties() {
        XCTAssertNil(ToolSchema.problem(in: object([:]).merging(["additionalProperties": false])))
        assertProblem(object([:]).merging(["additionalProperties": ["type": "string"]]),
                      "additionalProperties must be true or false (a schema there is not supported)")
        assertProblem(object(["f": ["type": "object", "additionalProperties": "no"]]),
                      "properties.f.additionalProperties must be true or false (a schema there is not supported)")
    }

    func testItems() {
        assertProblem(object(["x": ["type": "array", "items": [["type": "string"]]]]),
                      "properties.x.items must be a schema (a JSON object); an array of them is not supported")
        assertProblem(object(["x": ["type": "array", "items": true]]),
                      "properties.x.items must be a schema (a JSON object); an array of them is not supported")
        assertProblem(object(["x": ["type": "array", "items": ["type": "array", "items": ["minItems": -1]]]]),
                      "properties.x.items.items.minItems must be a whole number, 0 or more")
        assertProblem(object(["x": ["type": "array", "items": ["type": "object", "properties": ["n": ["type": "text"]]]]]),
                      "properties.x.items.properties.n.type must be one of object, array, string, number, integer, boolean, null, not \"text\"")
    }

    func testEnum() {
        XCTAssertNil(ToolSchema.problem(in: object(["x": ["enum": ["a", 1, nil]]])), "without a type, any values")
        XCTAssertNil(ToolSchema.problem(in: object(["x": ["type": "integer", "enum": [1, 2.0]]])))
        XCTAssertNil(ToolSchema.problem(in: object(["x": ["type": ["string", "null"], "enum": ["a", nil]]])))
        assertProblem(object(["x": ["enum": []]]), "properties.x.enum must be a non-empty array")
        assertProblem(object(["x": ["enum": "a"]]), "properties.x.enum must be a non-empty array")
        assertProblem(object(["x": ["type": "string", "enum": ["a", 1]]]), "properties.x.enum holds 1, which is not of its type (string)")
        assertProblem(object(["x": ["type": "integer", "enum": [1, 1.5]]]), "properties.x.enum holds 1.5, which is not of its type (integer)")
    }

    func testBounds() {
        XCTAssertNil(ToolSchema.problem(in: object(["x": ["minimum": -1.5, "maximum": -1.5]])))
        XCTAssertNil(ToolSchema.problem(in: object(["x": ["minLength": 3.0, "maxLength": 3]])), "3.0 is a whole number")
        assertProblem(object(["x": ["minimum": "1"]]), "properties.x.minimum must be a number")
        assertProblem(object(["x": ["maximum": nil]]), "properties.x.maximum must be a number")
        assertProblem(object(["x": ["minimum": 2, "maximum": 1]]), "properties.x.minimum is more than properties.x.maximum")
        assertProblem(object(["x": ["minLength": 1.5]]), "properties.x.minLength must be a whole number, 0 or more")
        assertProblem(object(["x": ["maxLength": -1]]), "properties.x.maxLength must be a whole number, 0 or more")
        assertProblem(object(["x": ["maxLength": "3"]]), "properties.x.maxLength must be a whole number, 0 or more")
        assertProblem(object(["x": ["minLength": 4, "maxLength": 3]]), "properties.x.minLength is more than properties.x.maxLength")
        assertProblem(object(["x": ["minItems": true]]), "properties.x.minItems must be a whole number, 0 or more")
        assertProblem(object(["x": ["maxItems": 0.5]]), "properties.x.maxItems must be a whole number, 0 or more")
        assertProblem(object(["x": ["minItems": 2, "maxItems": 1]]), "properties.x.minItems is more than properties.x.maxItems")
    }

    func testReferencesAreRefusedWhereverTheySit() {
        assertProblem(["type": "object", "$ref": "#/$defs/a"], "$ref is not supported: write the schema out in full")
        assertProblem(object(["x": ["$ref": "#/$defs/a"]]), "properties.x.$ref is not supported: write the schema out in full")
        assertProblem(object(["x": ["type": "array", "items": ["$ref": "#"]]]),
                      "properties.x.items.$ref is not supported: write the schema out in full")
        assertProblem(object(["x": ["anyOf": [["type": "string"], ["$ref": "#/$defs/a"]]]]),
                      "properties.x.anyOf[1].$ref is not supported: write the schema out in full")
        assertProblem(["type": "object", "$defs": ["a": ["properties": ["b": ["$ref": "#"]]]]],
                      "$defs.a.properties.b.$ref is not supported: write the schema out in full")
    }

    func testReferenceTextInDataOrAsAPropertyNameIsFine() {
        XCTAssertNil(ToolSchema.problem(in: object(["$ref": ["type": "string"]])))
        XCTAssertNil(ToolSchema.problem(in: object(["x": ["enum": [["$ref": "a"]], "default": ["$ref": "a"], "examples": [["$ref": "b"]]]])))
        XCTAssertNil(ToolSchema.problem(in: object(["x": ["const": ["$ref": "a"]]])))
    }

    func testIgnoredAndUnknownKeywords() {
        XCTAssertNil(ToolSchema.problem(in: object(["x": ["description": 3, "default": [1], "format": false, "title": "t"]])))
        XCTAssertNil(ToolSchema.problem(in: ["type": "object", "x-vendor": ["anything": true]]))
    }

    func testAssertionsThatCannotBeCheckedAreRefused() {
        assertProblem(object(["x": ["anyOf": [["type": "string"], ["type": "integer"]]]]),
                      "properties.x.anyOf is not supported: arguments could not be checked against it")
        assertProblem(object(["x": ["type": "array", "uniqueItems": true]]),
                      "properties.x.uniqueItems is not supported: arguments could not be checked against it")
        assertProblem(["type": "object", "minProperties": 1], "minProperties is not supported: arguments could not be checked against it")
    }

    func testPatternsMustBeRegularExpressions() {
        XCTAssertNil(ToolSchema.problem(in: object(["x": ["type": "string", "pattern": "^[a-z0-9-]{1,32}$"]])))
        assertProblem(object(["x": ["pattern": 5]]), "properties.x.pattern must be a string (a regular expression)")
        assertProblem(object(["x": ["pattern": "([a-z"]]), "properties.x.pattern is not a regular expression this daemon can check")
        assertProblem(object(["x": ["exclusiveMinimum": "1"]]), "properties.x.exclusiveMinimum must be a number")
    }
}

final class ToolSchemaValidationTests: XCTestCase {
    private func check(_ value: JSON, _ schema: JSON) -> String? { ToolSchema.validate(value, against: schema) }

    private func wrapped(_ property: JSON) -> JSON { ["type": "object", "properties": ["x": property]] }

    /// The message for `{"x": value}` against `{"x": property}`.
    private func checkProperty(_ value: JSON, _ property: JSON) -> String? { check(["x": value], wrapped(property)) }

    func testEveryTypeAndItsMessage() {
        let values: [(String, JSON)] = [
            ("object", ["a": 1]), ("array", [1]), ("string", "s"), ("number", 1.5), ("integer", 2), ("boolean", true), ("null", nil),
        ]
        let messages = [
            "object": "\"x\" must be a JSON object", "array": "\"x\" must be an array", "string": "\"x\" must be a string",
            "number": "\"x\" must be a number", "integer": "\"x\" must be an integer", "boolean": "\"x\" must be a boolean",
            "null": "\"x\" must be null",
        ]
        for (type, _) in values {
            for (valueType, value) in values {
                let found = checkProperty(value, ["type": .string(type)])
                let fits = type == valueType || (type == "number" && valueType == "integer")
                XCTAssertEqual(found, fits ? nil : messages[type], "\(valueType) against \(type)")
            }
        }
    }

    func testAnIntegerValuedDoubleIsAnInteger() {
        XCTAssertNil(checkProperty(.double(3.0), ["type": "integer"]))
        XCTAssertNil(checkProperty(.double(-0.0), ["type": "integer"]))
        XCTAssertNil(checkProperty(.double(1e20), ["type": "integer"]))
        XCTAssertEqual(checkProperty(.double(3.5), ["type": "integer"]), "\"x\" must be an integer")
        XCTAssertEqual(checkProperty("3", ["type": "integer"]), "\"x\" must be an integer")
        XCTAssertEqual(checkProperty(true, ["type": "number"]), "\"x\" must be a number")
    }

    func testSeveralTypes() {
        XCTAssertNil(checkProperty(nil, ["type": ["string", "null"]]))
        XCTAssertNil(checkProperty("a", ["type": ["string", "null"]]))
        XCTAssertEqual(checkProperty(1, ["type": ["string", "null"]]), "\"x\" must be a string or null")
        XCTAssertEqual(checkProperty(true, ["type": ["integer", "string", "null"]]), "\"x\" must be an integer, a string or null")
    }

    func testTheArgumentsThemselves() {
        XCTAssertEqual(check([1], ["type": "object"]), "arguments must be a JSON object")
        XCTAssertEqual(check("a", ["type": "object"]), "arguments must be a JSON object")
        XCTAssertNil(check([:], ["type": "object"]))
    }

    func testEnum() {
        let units: JSON = ["type": "string", "enum": ["metric", "imperial"]]
        XCTAssertNil(checkProperty("metric", units))
        XCTAssertEqual(checkProperty("kelvin", units), "\"x\" must be one of \"metric\", \"imperial\"")
        XCTAssertEqual(checkProperty("Metric", units), "\"x\" must be one of \"metric\", \"imperial\"")
        let mixed: JSON = ["enum": [1, "two", nil, true, [3]]]
        XCTAssertNil(checkProperty(.double(1.0), mixed), "1.0 is 1")
        XCTAssertNil(checkProperty(nil, mixed))
        XCTAssertNil(checkProperty([3], mixed))
        XCTAssertEqual(checkProperty(2, mixed), "\"x\" must be one of 1, \"two\", null, true, [3]")
        // The type is checked first: its message says more.
        XCTAssertEqual(checkProperty(3, units), "\"x\" must be a string")
    }

    func testRequired() {
        let schema: JSON = ["type": "object", "properties": ["city": ["type": "string"], "days": ["type": "integer"]], "required": ["city", "days"]]
        XCTAssertEqual(check([:], schema), "\"city\" is required")
        XCTAssertEqual(check(["city": "Oslo"], schema), "\"days\" is required")
        XCTAssertNil(check(["city": "Oslo", "days": 3], schema))
        // Null is a value: present, and then the type says whether it may be null.
        XCTAssertEqual(check(["city": nil, "days": 3], schema), "\"city\" must be a string")
    }

    func testAdditionalProperties() {
        let closed: JSON = ["type": "object", "properties": ["a": [:]], "additionalProperties": false]
        XCTAssertNil(check(["a": 1], closed))
        XCTAssertEqual(check(["a": 1, "foo": 2], closed), "unknown argument \"foo\"")
        XCTAssertEqual(check(["zeta": 1, "beta": 2], closed), "unknown argument \"beta\"", "the first in name order")
        let open: JSON = ["type": "object", "properties": ["a": [:]], "additionalProperties": true]
        XCTAssertNil(check(["a": 1, "foo": 2], open))
        XCTAssertNil(check(["a": 1, "foo": 2], ["type": "object", "properties": ["a": [:]]]), "open unless it says otherwise")
        // Names are shown as JSON strings: quotes and control characters escaped.
        XCTAssertEqual(check(["a\"b\n": 1], closed), "unknown argument \"a\\\"b\\n\"")
    }

    func testNestedNamesAndPaths() {
        let schema: JSON = [
            "type": "object",
            "properties": [
                "filters": [
                    "type": "object",
                    "properties": [
                        "tags": ["type": "array", "items": ["type": "string"]],
                        "range": ["type": "object", "properties": ["from": ["type": "integer"]], "required": ["from"]],
                    ],
                    "additionalProperties": false,
                ],
                "rows": ["type": "array", "items": ["type": "object", "properties": ["name": ["type": "string"]], "required": ["name"]]],
                "grid": ["type": "array", "items": ["type": "array", "items": ["type": "number"]]],
            ],
        ]
        XCTAssertNil(check(["filters": ["tags": ["a", "b"], "range": ["from": 1]], "rows": [["name": "n"]], "grid": [[1, 2.5], []]], schema))
        XCTAssertEqual(check(["filters": ["tags": ["a", 2]]], schema), "\"filters.tags[1]\" must be a string")
        XCTAssertEqual(check(["filters": ["tags": "a"]], schema), "\"filters.tags\" must be an array")
        XCTAssertEqual(check(["filters": ["range": [:]]], schema), "\"filters.range.from\" is required")
        XCTAssertEqual(check(["filters": ["range": ["from": "x"]]], schema), "\"filters.range.from\" must be an integer")
        XCTAssertEqual(check(["filters": ["colour": "red"]], schema), "unknown argument \"filters.colour\"")
        XCTAssertEqual(check(["filters": 3], schema), "\"filters\" must be a JSON object")
        XCTAssertEqual(check(["rows": [["name": "a"], [:]]], schema), "\"rows[1].name\" is required")
        XCTAssertEqual(check(["rows": [["name": 5]]], schema), "\"rows[0].name\" must be a string")
        XCTAssertEqual(check(["grid": [[1], [2, "x"]]], schema), "\"grid[1][1]\" must be a number")
    }

    func testTheValidateFunctionTakesAPathPrefix() {
        XCTAssertEqual(ToolSchema.validate(1, against: ["type": "string"], path: "a.b"), "\"a.b\" must be a string")
        XCTAssertEqual(ToolSchema.validate(["c": 1], against: ["properties": ["c": ["type": "string"]]], path: "a"), "\"a.c\" must be a string")
        XCTAssertEqual(ToolSchema.validate([1], against: ["items": ["type": "string"]], path: "a"), "\"a[0]\" must be a string")
    }

    func testNumberBounds() {
        let days: JSON = ["type": "integer", "minimum": 1, "maximum": 16]
        XCTAssertNil(checkProperty(1, days))
        XCTAssertNil(checkProperty(16, days))
        XCTAssertNil(checkProperty(.double(16.0), days))
        XCTAssertEqual(checkProperty(0, days), "\"x\" must be at least 1")
        XCTAssertEqual(checkProperty(17, days), "\"x\" must be at most 16")
        let ratio: JSON = ["type": "number", "minimum": 0.5, "maximum": 2.5]
        XCTAssertNil(checkProperty(0.5, ratio))
        XCTAssertEqual(checkProperty(0.25, ratio), "\"x\" must be at least 0.5")
        XCTAssertEqual(checkProperty(3, ratio), "\"x\" must be at most 2.5")
        // Without a type, bounds apply to numbers only.
        XCTAssertNil(checkProperty("0", ["minimum": 1]))
    }

    func testPatterns() {
        let slug = wrapped(["type": "string", "pattern": "^[a-z0-9-]+$"])
        XCTAssertNil(check(["x": "item-42"], slug))
        XCTAssertEqual(check(["x": ".."], slug), #""x" must match the pattern "^[a-z0-9-]+$""#)
        XCTAssertEqual(check(["x": "a/b"], slug), #""x" must match the pattern "^[a-z0-9-]+$""#)
        // Unanchored, a pattern may match anywhere, as JSON Schema says.
        XCTAssertNil(check(["x": "xx42yy"], wrapped(["pattern": "[0-9]+"])))
        XCTAssertEqual(check(["x": "none"], wrapped(["pattern": "[0-9]+"])), #""x" must match the pattern "[0-9]+""#)
        // Only strings are held to a pattern.
        XCTAssertNil(check(["x": 5], wrapped(["pattern": "^a$"])))
        let long = String(repeating: "a", count: ToolSchema.maxPatternSubjectLength + 1)
        XCTAssertEqual(check(["x": .string(long)], wrapped(["pattern": "^a+$"])),
                       #""x" must be at most 4096 characters long to be checked against its pattern"#)
    }

    func testConstAndExclusiveBounds() {
        XCTAssertNil(check(["x": "v1"], wrapped(["const": "v1"])))
        XCTAssertEqual(check(["x": "v2"], wrapped(["const": "v1"])), #""x" must be "v1""#)
        let open = wrapped(["type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10])
        XCTAssertNil(check(["x": 5], open))
        XCTAssertEqual(check(["x": 0], open), #""x" must be more than 0"#)
        XCTAssertEqual(check(["x": 10], open), #""x" must be less than 10"#)
    }

    func testStringLengthsCountCharacters() {
        let name: JSON = ["type": "string", "minLength": 2, "maxLength": 3]
        XCTAssertNil(checkProperty("ab", name))
        XCTAssertNil(checkProperty("äöü", name), "three characters, six bytes")
        XCTAssertEqual(checkProperty("a", name), "\"x\" must be at least 2 characters long")
        XCTAssertEqual(checkProperty("abcd", name), "\"x\" must be at most 3 characters long")
        XCTAssertEqual(checkProperty("", ["minLength": 1]), "\"x\" must be at least 1 character long")
        XCTAssertEqual(checkProperty("ab", ["maxLength": 1]), "\"x\" must be at most 1 character long")
        XCTAssertNil(checkProperty(5, ["minLength": 3]), "lengths apply to strings only")
        XCTAssertNil(checkProperty("ab", ["minLength": 2.0]), "2.0 is a whole number")
    }

    func testArrayLengths() {
        let tags: JSON = ["type": "array", "minItems": 1, "maxItems": 2]
        XCTAssertNil(checkProperty(["a"], tags))
        XCTAssertNil(checkProperty(["a", "b"], tags))
        XCTAssertEqual(checkProperty([], tags), "\"x\" must have at least 1 item")
        XCTAssertEqual(checkProperty(["a", "b", "c"], tags), "\"x\" must have at most 2 items")
        XCTAssertEqual(checkProperty([], ["minItems": 2]), "\"x\" must have at least 2 items")
        XCTAssertEqual(checkProperty([1, 2], ["maxItems": 1]), "\"x\" must have at most 1 item")
    }

    func testMalformedKeywordsAreSkipped() {
        // problem(in:) is where schemas are judged; validation never traps on one it refused.
        XCTAssertNil(checkProperty(5, ["minimum": "9", "maxLength": -1, "items": 3, "enum": [], "type": 7]))
        XCTAssertNil(check(["a": 1], ["type": "object", "required": "a", "properties": 3, "additionalProperties": "no"]))
        XCTAssertNil(check("anything", "not a schema"))
    }
}

private extension JSON {
    func merging(_ other: [String: JSON]) -> JSON {
        .object((object ?? [:]).merging(other) { _, new in new })
    }
}
