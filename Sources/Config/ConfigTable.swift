import ConfabProtocol
import TOML

/// A config file that cannot be used, said so that the user can fix it.
public struct ConfigError: Error, Equatable, CustomStringConvertible {
    public let description: String

    public init(description: String) {
        self.description = description
    }
}

/// Typed reads from one table of a config file. Each read names what it expected, so a
/// wrong type is reported with the key's line and the type wanted; keys nobody read are
/// the file's unknown keys.
public struct ConfigTable {
    /// The file's name, for messages.
    public let file: String
    /// The dotted path of this table ("" for the document itself).
    public let path: String
    public let table: TOMLTable
    /// Where the table was written, when it is a member of another: errors about it as a whole go there.
    public private(set) var position: TOMLPosition?
    private var read: Set<String> = []
    private var subtables: [ConfigTable] = []

    public init(file: String, path: String = "", table: TOMLTable) {
        self.file = file
        self.path = path
        self.table = table
    }

    /// The key's dotted name for messages; a key that is empty or holds control, format or
    /// dot characters is quoted with escapes, so a message never carries them to a terminal.
    public func name(_ key: String) -> String {
        let plain = !key.isEmpty && key.unicodeScalars.allSatisfy { scalar in
            ![.control, .format, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory)
                && scalar != "." && scalar != "\""
        }
        let shown = plain ? key : "\"" + key.unicodeScalars.map { $0.escaped(asASCII: true) }.joined() + "\""
        return path.isEmpty ? shown : path + "." + shown
    }

    /// An error about `key` of this table, at its line.
    public func error(_ key: String, _ problem: String) -> ConfigError {
        let line = table.position(of: key).map { "\($0): " } ?? ""
        return ConfigError(description: "\(file): \(line)\(name(key)) \(problem)")
    }

    private mutating func value(_ key: String) -> TOMLValue? {
        read.insert(key)
        return table[key]
    }

    private func wrongType(_ key: String, _ value: TOMLValue, expected: String) -> ConfigError {
        error(key, "must be \(expected), not \(value.kindDescription)")
    }

    /// The value as written, whatever its type (a schema, read as data): nil when absent.
    public mutating func untyped(_ key: String) -> TOMLValue? {
        value(key)
    }

    public mutating func string(_ key: String) throws(ConfigError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else { throw wrongType(key, value, expected: "a string") }
        return text
    }

    public mutating func integer(_ key: String) throws(ConfigError) -> Int? {
        guard let value = value(key) else { return nil }
        guard case .integer(let number) = value else { throw wrongType(key, value, expected: "an integer") }
        guard let result = Int(exactly: number) else { throw error(key, "is out of range") }
        return result
    }

    /// An integer is a number too: `temperature = 0` means 0.0.
    public mutating func number(_ key: String) throws(ConfigError) -> Double? {
        guard let value = value(key) else { return nil }
        switch value {
        case .integer(let number):
            return Double(number)
        case .float(let number):
            guard number.isFinite else { throw error(key, "must be a finite number") }
            return number
        default:
            throw wrongType(key, value, expected: "a number")
        }
    }

    public mutating func boolean(_ key: String) throws(ConfigError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .boolean(let flag) = value else { throw wrongType(key, value, expected: "true or false") }
        return flag
    }

    public mutating func integers(_ key: String) throws(ConfigError) -> [Int]? {
        guard let value = value(key) else { return nil }
        guard case .array(let elements) = value else { throw wrongType(key, value, expected: "an array of integers") }
        var result: [Int] = []
        for element in elements {
            guard case .integer(let number) = element, let integer = Int(exactly: number) else {
                throw error(key, "must be an array of integers, not one holding \(element.kindDescription)")
            }
            result.append(integer)
        }
        return result
    }

    public mutating func strings(_ key: String) throws(ConfigError) -> [String]? {
        guard let value = value(key) else { return nil }
        guard case .array(let elements) = value else { throw wrongType(key, value, expected: "an array of strings") }
        var result: [String] = []
        for element in elements {
            guard case .string(let text) = element else {
                throw error(key, "must be an array of strings, not one holding \(element.kindDescription)")
            }
            result.append(text)
        }
        return result
    }

    /// A table whose every value is a string (`headers = { "X-Team" = "a" }`), in the order written.
    public mutating func stringTable(_ key: String) throws(ConfigError) -> [(key: String, value: String)]? {
        guard let value = value(key) else { return nil }
        guard case .table(let inner) = value else { throw wrongType(key, value, expected: "a table of strings") }
        let section = ConfigTable(file: file, path: name(key), table: inner)
        var result: [(key: String, value: String)] = []
        for member in inner.members {
            guard case .string(let text) = member.value else {
                throw section.error(member.key, "must be a string, not \(member.value.kindDescription)")
            }
            result.append((member.key, text))
        }
        return result
    }

    /// A table of tables (`[providers.NAME]`): each member read through the closure as a table
    /// of its own, in the order written; their unknown keys count too.
    public mutating func tables<Result>(_ key: String, _ body: (String, inout ConfigTable) throws(ConfigError) -> Result) throws(ConfigError) -> [Result]? {
        guard let value = value(key) else { return nil }
        guard case .table(let inner) = value else { throw wrongType(key, value, expected: "a table") }
        var outer = ConfigTable(file: file, path: name(key), table: inner)
        var results: [Result] = []
        for member in inner.members {
            guard let result = try outer.table(member.key, { (section: inout ConfigTable) throws(ConfigError) in try body(member.key, &section) }) else { continue }
            results.append(result)
        }
        subtables.append(outer)
        return results
    }

    /// A `[section]` (or inline table), read through the closure; its unknown keys count too.
    public mutating func table<Result>(_ key: String, _ body: (inout ConfigTable) throws(ConfigError) -> Result) throws(ConfigError) -> Result? {
        guard let value = value(key) else { return nil }
        guard case .table(let inner) = value else { throw wrongType(key, value, expected: "a table") }
        var section = ConfigTable(file: file, path: name(key), table: inner)
        section.position = table.position(of: key)
        let result = try body(&section)
        subtables.append(section)
        return result
    }

    /// Counts every key of the table as read: for a table another module reads whole (`[web]`),
    /// which refuses its own unknown keys.
    public mutating func readEveryKey() {
        for member in table.members { read.insert(member.key) }
    }

    /// Every key of this table and the tables read from it that no read asked for, with its
    /// line, and the key it is probably a typo of: one this table reads and the file lacks.
    public var unknownKeys: [(name: String, position: TOMLPosition, suggestion: String?)] {
        let present = Set(table.members.map(\.key))
        let candidates = read.subtracting(present).sorted()
        return table.members.filter { !read.contains($0.key) }.map { member in
            (name(member.key), member.position, Typos.closest(to: member.key, among: candidates).map(name))
        } + subtables.flatMap(\.unknownKeys)
    }

    /// Throws for unknown keys: a typo must not silently leave a default in place.
    public func rejectUnknownKeys() throws(ConfigError) {
        let unknown = unknownKeys.sorted { ($0.position.line, $0.position.column) < ($1.position.line, $1.position.column) }
        guard !unknown.isEmpty else { return }
        let list = unknown.map { "\($0.name) (\($0.position)\($0.suggestion.map { "; did you mean \($0)?" } ?? ""))" }.joined(separator: ", ")
        throw ConfigError(description: "\(file): unknown keys: \(list)")
    }

}
