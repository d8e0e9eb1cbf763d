import CTOML

/// A parsed TOML document's values. Inline tables and `[table]`s are both `.table`;
/// `[[array of tables]]` is an `.array` of `.table`s.
public enum TOMLValue: Equatable, Sendable {
    case table(TOMLTable)
    case array([TOMLValue])
    case string(String)
    case integer(Int64)
    case float(Double)
    case boolean(Bool)
    /// A local date, local time, local date-time or offset date-time, as RFC 3339 text.
    case dateTime(String)

    /// What a type error calls this value: "a string", "an integer".
    public var kindDescription: String {
        switch self {
        case .table: "a table"
        case .array: "an array"
        case .string: "a string"
        case .integer: "an integer"
        case .float: "a float"
        case .boolean: "a boolean"
        case .dateTime: "a date or time"
        }
    }
}

/// Where something was written in the file, counted from 1.
public struct TOMLPosition: Equatable, Sendable, CustomStringConvertible {
    public var line: Int
    public var column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    public var description: String { "line \(line)" }
}

/// A table's members in the order they were written, each with where its key is.
public struct TOMLTable: Equatable, Sendable {
    public struct Member: Equatable, Sendable {
        public var key: String
        public var value: TOMLValue
        public var position: TOMLPosition

        public init(key: String, value: TOMLValue, position: TOMLPosition) {
            self.key = key
            self.value = value
            self.position = position
        }
    }

    public var members: [Member]

    public init(members: [Member] = []) {
        self.members = members
    }

    public var keys: [String] { members.map(\.key) }

    public subscript(key: String) -> TOMLValue? {
        members.first { $0.key == key }?.value
    }

    public func position(of key: String) -> TOMLPosition? {
        members.first { $0.key == key }?.position
    }
}

/// Text that is not valid TOML, with the parser's own message.
public struct TOMLSyntaxError: Error, Equatable, CustomStringConvertible {
    public var message: String
    public var position: TOMLPosition

    public var description: String { "\(position): \(message)" }
}

extension TOMLTable {
    /// Parses a whole document (toml++, TOML 1.0).
    public init(parsing text: String) throws(TOMLSyntaxError) {
        var text = text
        let parsed: Result<TOMLTable, TOMLSyntaxError> = text.withUTF8 { bytes in
            guard let document = bytes.withMemoryRebound(to: CChar.self, { ctoml_parse($0.baseAddress, $0.count) }) else {
                return .failure(TOMLSyntaxError(message: "out of memory", position: TOMLPosition(line: 1, column: 1)))
            }
            defer { ctoml_free(document) }
            var line: UInt32 = 0
            var column: UInt32 = 0
            if let message = ctoml_error(document, &line, &column) {
                return .failure(TOMLSyntaxError(message: String(cString: message),
                                                position: TOMLPosition(line: Int(line), column: Int(column))))
            }
            var count = 0
            guard let nodes = ctoml_nodes(document, &count), count > 0 else { return .success(TOMLTable()) }
            var reader = NodeReader(nodes: UnsafeBufferPointer(start: nodes, count: count))
            guard case .table(let root) = reader.next().value else { return .success(TOMLTable()) }
            return .success(root)
        }
        self = try parsed.get()
    }
}

/// Walks the shim's pre-order node array once, copying everything into Swift values
/// (toml++ limits nesting, so the recursion is bounded).
private struct NodeReader {
    let nodes: UnsafeBufferPointer<ctoml_node>
    var index = 0

    mutating func next() -> TOMLTable.Member {
        let node = nodes[index]
        index += 1
        let key = node.key.map { Self.text($0, node.key_length) } ?? ""
        let position = TOMLPosition(line: Int(node.line), column: Int(node.column))
        let value: TOMLValue
        switch node.kind {
        case CTOML_TABLE:
            var members: [TOMLTable.Member] = []
            members.reserveCapacity(node.children)
            for _ in 0..<node.children { members.append(next()) }
            value = .table(TOMLTable(members: members))
        case CTOML_ARRAY:
            var elements: [TOMLValue] = []
            elements.reserveCapacity(node.children)
            for _ in 0..<node.children { elements.append(next().value) }
            value = .array(elements)
        case CTOML_STRING:
            value = .string(node.text.map { Self.text($0, node.text_length) } ?? "")
        case CTOML_INTEGER:
            value = .integer(node.integer)
        case CTOML_FLOAT:
            value = .float(node.floating)
        case CTOML_BOOLEAN:
            value = .boolean(node.boolean)
        default:
            value = .dateTime(node.text.map { Self.text($0, node.text_length) } ?? "")
        }
        return TOMLTable.Member(key: key, value: value, position: position)
    }

    private static func text(_ start: UnsafePointer<CChar>, _ length: Int) -> String {
        start.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }
}
