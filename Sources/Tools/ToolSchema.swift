import ConfabProtocol

/// The part of JSON Schema a tool's parameters may use, checked twice: once when the config
/// is read (`problem(in:)`: is this a schema we can hold the model's arguments to?) and once
/// per call (`validate`: do these arguments match it?).
///
/// Supported, and checked before any request: `type` (a name or an array of names),
/// `properties`, `required`, `additionalProperties` (true or false), `enum`, `const`, `items`,
/// `minimum`/`maximum`, `exclusiveMinimum`/`exclusiveMaximum`, `minLength`/`maxLength`,
/// `pattern`, `minItems`/`maxItems`. Annotations (`description`, `title`, `default`,
/// `examples`, `format`, `x-…` and other unknown words) are passed to the model and otherwise
/// ignored. The assertions this subset cannot check (`anyOf`, `oneOf`, `allOf`, `not`,
/// `uniqueItems`, `multipleOf`, …) and `$ref` are refused: the config must not promise a check
/// that is not made.
public enum ToolSchema {
    /// The type names JSON Schema knows.
    public static let typeNames = ["object", "array", "string", "number", "integer", "boolean", "null"]

    /// Keywords whose values are data, not schemas: a `$ref` inside them is just a value.
    private static let dataKeywords: Set<String> = ["enum", "const", "default", "examples", "description", "title", "format"]

    /// Who answers for a `pattern` confabd cannot run in linear time (a backreference, a
    /// lookaround): the config's schemas are refused for it; an MCP server's schema is checked
    /// without it, the pattern left to the server.
    public enum UnsupportedPatterns: Sendable {
        case refused, leftToServer
    }

    /// nil when `schema` is a usable parameters schema; else what is wrong, naming where in
    /// the schema (`properties.days.minimum must be a number`).
    public static func problem(in schema: JSON, unsupportedPatterns: UnsupportedPatterns = .refused) -> String? {
        guard let members = schema.object else { return "must be a JSON object with type \"object\"" }
        switch members["type"] {
        case nil:
            return "needs type \"object\" at the top level"
        case .string("object")?:
            break
        default:
            return "type must be \"object\" at the top level"
        }
        return problem(inNode: schema, at: "", unsupportedPatterns)
    }

    /// One schema node and everything under it; `at` is its dotted place in the schema.
    private static func problem(inNode node: JSON, at place: String, _ unsupportedPatterns: UnsupportedPatterns) -> String? {
        func name(_ keyword: String) -> String { place.isEmpty ? keyword : place + "." + keyword }
        guard let members = node.object else { return "\(place) must be a schema (a JSON object)" }
        if members["$ref"] != nil {
            return "\(name("$ref")) is not supported: write the schema out in full"
        }

        var types: [String]?
        if let type = members["type"] {
            switch declaredTypes(type, keyword: name("type")) {
            case .success(let names): types = names
            case .failure(let refusal): return refusal.text
            }
        }

        var propertyNames: Set<String> = []
        if let properties = members["properties"] {
            guard let schemas = properties.object else { return "\(name("properties")) must be an object of schemas" }
            for key in schemas.keys.sorted() {
                if let found = problem(inNode: schemas[key]!, at: name("properties") + "." + shown(key), unsupportedPatterns) { return found }
            }
            propertyNames = Set(schemas.keys)
        }
        if let required = members["required"] {
            guard let names = required.array else { return "\(name("required")) must be an array of property names" }
            var seen: Set<String> = []
            for element in names {
                guard let key = element.string else { return "\(name("required")) must be an array of property names, not one holding \(element.text)" }
                guard propertyNames.contains(key) else {
                    return "\(name("required")) names \(JSON.string(key).text), which is not one of \(name("properties"))"
                }
                guard seen.insert(key).inserted else { return "\(name("required")) names \(JSON.string(key).text) twice" }
            }
        }
        if let additional = members["additionalProperties"], additional.bool == nil {
            return "\(name("additionalProperties")) must be true or false (a schema there is not supported)"
        }
        if let items = members["items"] {
            guard items.object != nil else { return "\(name("items")) must be a schema (a JSON object); an array of them is not supported" }
            if let found = problem(inNode: items, at: name("items"), unsupportedPatterns) { return found }
        }
        if let values = members["enum"] {
            guard let choices = values.array, !choices.isEmpty else { return "\(name("enum")) must be a non-empty array" }
            if let types {
                for choice in choices where !matches(choice, types) {
                    return "\(name("enum")) holds \(choice.text), which is not of its type (\(types.joined(separator: ", ")))"
                }
            }
        }
        if let pattern = members["pattern"], let found = patternProblem(pattern, keyword: name("pattern"), unsupportedPatterns) {
            return found
        }
        if let found = boundsProblem(members, name) { return found }
        // Keywords we do not use still reach the model: one that hides a $ref is refused too.
        for key in members.keys.sorted() where !knownKeywords.contains(key) && !dataKeywords.contains(key) {
            if let found = hiddenReference(in: members[key]!, at: name(shown(key))) { return found }
        }
        for key in members.keys.sorted() where uncheckedAssertions.contains(key) {
            return "\(name(shown(key))) is not supported: arguments could not be checked against it"
        }
        return nil
    }

    /// A problem's words, as the failure of a step that otherwise gives a value.
    private struct Refusal: Error { let text: String }

    /// `type`: one type name or a non-empty array of distinct ones.
    private static func declaredTypes(_ type: JSON, keyword: String) -> Result<[String], Refusal> {
        let names: [JSON]
        switch type {
        case .string: names = [type]
        case .array(let elements) where !elements.isEmpty: names = elements
        default: return .failure(Refusal(text: "\(keyword) must be a type name or a non-empty array of them"))
        }
        var seen: [String] = []
        for element in names {
            guard let text = element.string, typeNames.contains(text) else {
                return .failure(Refusal(text: "\(keyword) must be one of \(typeNames.joined(separator: ", ")), not \(element.text)"))
            }
            guard !seen.contains(text) else { return .failure(Refusal(text: "\(keyword) names \"\(text)\" twice")) }
            seen.append(text)
        }
        return .success(seen)
    }

    /// `pattern`: a regular expression RE2 can match in linear time (or, where unsupported
    /// patterns are allowed, one whose construct is left to the server to check).
    private static func patternProblem(_ pattern: JSON, keyword: String, _ unsupportedPatterns: UnsupportedPatterns) -> String? {
        guard let text = pattern.string else { return "\(keyword) must be a string (a regular expression)" }
        switch SchemaPattern.compile(text) {
        case .success: return nil
        case .failure(.invalid):
            return "\(keyword) is not a regular expression this daemon can check"
        case .failure(.unsupported(let construct)):
            guard unsupportedPatterns == .refused else { return nil }
            return "\(keyword) uses \(construct), which confabd cannot match in linear time (RE2): write the pattern without it"
        }
    }

    /// The numeric bounds: numbers (or whole counts) where given, the low one not above the high.
    private static func boundsProblem(_ members: [String: JSON], _ name: (String) -> String) -> String? {
        for (low, high) in [("minimum", "maximum"), ("exclusiveMinimum", "exclusiveMaximum")] {
            for keyword in [low, high] {
                if let bound = members[keyword], bound.double == nil || !bound.double!.isFinite {
                    return "\(name(keyword)) must be a number"
                }
            }
            if let minimum = members[low]?.double, let maximum = members[high]?.double, minimum > maximum {
                return "\(name(low)) is more than \(name(high))"
            }
        }
        for (low, high) in [("minLength", "maxLength"), ("minItems", "maxItems")] {
            for keyword in [low, high] {
                if let bound = members[keyword], (integer(bound) ?? -1) < 0 {
                    return "\(name(keyword)) must be a whole number, 0 or more"
                }
            }
            if let minimum = members[low].flatMap(integer), let maximum = members[high].flatMap(integer), minimum > maximum {
                return "\(name(low)) is more than \(name(high))"
            }
        }
        return nil
    }

    private static let knownKeywords: Set<String> = [
        "type", "properties", "required", "additionalProperties", "enum", "items",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems",
    ]

    /// JSON Schema's assertions outside the subset: a schema holding one is refused rather
    /// than passed on unchecked.
    private static let uncheckedAssertions: Set<String> = [
        "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependentRequired", "dependencies",
        "prefixItems", "contains", "minContains", "maxContains", "uniqueItems", "unevaluatedItems", "unevaluatedProperties",
        "patternProperties", "propertyNames", "minProperties", "maxProperties", "multipleOf", "additionalItems",
    ]

    /// The longest string checked against a `pattern`: matching is linear in the string's
    /// length (RE2), but the check runs on the daemon's loop, and the model chooses the string.
    public static let maxPatternSubjectLength = 4096

    /// `pattern` compiled to run in linear time, or nil when it cannot be (then it is not
    /// checked here: the config refuses such a pattern; a server's is left to the server).
    static func compiledPattern(_ pattern: String) -> SchemaPattern? {
        try? SchemaPattern.compile(pattern).get()
    }

    /// A key as a schema problem names it: quoted with escapes when it is empty or holds a dot,
    /// a quote, or a control or format character, so a message never carries those to a terminal.
    static func shown(_ key: String) -> String {
        let plain = !key.isEmpty && key.unicodeScalars.allSatisfy { scalar in
            ![.control, .format, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory)
                && scalar != "." && scalar != "\""
        }
        return plain ? key : "\"" + key.unicodeScalars.map { $0.escaped(asASCII: true) }.joined() + "\""
    }

    private static func hiddenReference(in value: JSON, at place: String) -> String? {
        switch value {
        case .object(let members):
            if members["$ref"] != nil { return "\(place).$ref is not supported: write the schema out in full" }
            for key in members.keys.sorted() where !dataKeywords.contains(key) {
                if let found = hiddenReference(in: members[key]!, at: place + "." + shown(key)) { return found }
            }
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                if let found = hiddenReference(in: element, at: "\(place)[\(index)]") { return found }
            }
        default:
            break
        }
        return nil
    }

    /// A whole number, however it was written (3 or 3.0).
    static func integer(_ value: JSON) -> Int? {
        switch value {
        case .int(let number): return number
        case .double(let number): return number.isFinite && number == number.rounded() && abs(number) < 0x1p63 ? Int(number) : nil
        default: return nil
        }
    }

    /// Whether `value` is of one of `types` (an integer-valued double is an integer).
    static func matches(_ value: JSON, _ types: [String]) -> Bool {
        types.contains { type in
            switch (type, value) {
            case ("object", .object), ("array", .array), ("string", .string), ("boolean", .bool), ("null", .null): true
            case ("number", .int), ("number", .double): true
            case ("integer", .int): true
            case ("integer", .double(let number)): number.isFinite && number == number.rounded()
            default: false
            }
        }
    }

    // MARK: - Validation

    /// nil when `value` matches `schema`; else a message for the model and the user naming the
    /// argument (`"days" must be an integer`, `"filters.tags[1]" must be a string`). `path` is
    /// where `value` sits in the arguments ("" for the arguments themselves). A keyword whose
    /// value is malformed is skipped: `problem(in:)` is where schemas are judged.
    public static func validate(_ value: JSON, against schema: JSON, path: String = "") -> String? {
        guard let members = schema.object else { return nil }
        let subject = path.isEmpty ? "arguments" : JSON.string(path).text

        if let types = typeList(members["type"]), !matches(value, types) {
            return "\(subject) must be \(describe(types))"
        }
        if let choices = members["enum"]?.array, !choices.isEmpty, !choices.contains(value) {
            return "\(subject) must be one of \(choices.map(\.text).joined(separator: ", "))"
        }
        if let constant = members["const"], constant != value {
            return "\(subject) must be \(constant.text)"
        }

        switch value {
        case .object(let object):
            let properties = members["properties"]?.object ?? [:]
            for case .string(let key) in members["required"]?.array ?? [] where object[key] == nil {
                return "\(JSON.string(child(path, key)).text) is required"
            }
            if members["additionalProperties"]?.bool == false {
                for key in object.keys.sorted() where properties[key] == nil {
                    return "unknown argument \(JSON.string(child(path, key)).text)"
                }
            }
            for key in object.keys.sorted() {
                guard let property = properties[key] else { continue }
                if let found = validate(object[key]!, against: property, path: child(path, key)) { return found }
            }
        case .array(let elements):
            if let minimum = members["minItems"].flatMap(integer), elements.count < minimum {
                return "\(subject) must have at least \(count(minimum, "item"))"
            }
            if let maximum = members["maxItems"].flatMap(integer), elements.count > maximum {
                return "\(subject) must have at most \(count(maximum, "item"))"
            }
            if let items = members["items"], items.object != nil {
                for (index, element) in elements.enumerated() {
                    if let found = validate(element, against: items, path: "\(path)[\(index)]") { return found }
                }
            }
        case .string(let text):
            // JSON Schema counts characters as code points.
            let length = text.unicodeScalars.count
            if let minimum = members["minLength"].flatMap(integer), length < minimum {
                return "\(subject) must be at least \(count(minimum, "character")) long"
            }
            if let maximum = members["maxLength"].flatMap(integer), length > maximum {
                return "\(subject) must be at most \(count(maximum, "character")) long"
            }
            if let pattern = members["pattern"]?.string, let expression = compiledPattern(pattern) {
                guard length <= maxPatternSubjectLength else {
                    return "\(subject) must be at most \(count(maxPatternSubjectLength, "character")) long to be checked against its pattern"
                }
                // As JSON Schema says, the pattern may match anywhere unless it is anchored.
                guard expression.matches(text) else {
                    return "\(subject) must match the pattern \(JSON.string(pattern).text)"
                }
            }
        case .int, .double:
            let number = value.double!
            if let minimum = members["minimum"], let bound = minimum.double, number < bound {
                return "\(subject) must be at least \(minimum.text)"
            }
            if let maximum = members["maximum"], let bound = maximum.double, number > bound {
                return "\(subject) must be at most \(maximum.text)"
            }
            if let minimum = members["exclusiveMinimum"], let bound = minimum.double, number <= bound {
                return "\(subject) must be more than \(minimum.text)"
            }
            if let maximum = members["exclusiveMaximum"], let bound = maximum.double, number >= bound {
                return "\(subject) must be less than \(maximum.text)"
            }
        case .bool, .null:
            break
        }
        return nil
    }

    private static func typeList(_ type: JSON?) -> [String]? {
        switch type {
        case .string(let name)?: return [name]
        case .array(let names)?:
            let list = names.compactMap(\.string)
            return list.isEmpty ? nil : list
        default: return nil
        }
    }

    /// "a string", "a string or null", "an integer, a string or null".
    private static func describe(_ types: [String]) -> String {
        let nouns = types.map { type in
            switch type {
            case "object": "a JSON object"
            case "array": "an array"
            case "string": "a string"
            case "number": "a number"
            case "integer": "an integer"
            case "boolean": "a boolean"
            case "null": "null"
            default: type
            }
        }
        guard nouns.count > 1 else { return nouns.first ?? "" }
        return nouns.dropLast().joined(separator: ", ") + " or " + nouns.last!
    }

    private static func count(_ number: Int, _ noun: String) -> String {
        number == 1 ? "1 \(noun)" : "\(number) \(noun)s"
    }

    private static func child(_ path: String, _ key: String) -> String {
        path.isEmpty ? key : path + "." + key
    }
}
