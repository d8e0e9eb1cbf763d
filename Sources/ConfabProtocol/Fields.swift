// A method's params and its result as typed values, each described once by its fields: the
// same description writes the value (a client's request, the daemon's answer) and reads it
// (the daemon's request, a client's answer), so each field name is spelled in one place.

/// A value sent as a JSON object: a method's params or its result.
public protocol RPCObject: Equatable, Sendable {
    /// The value before its fields are read: every required field is set by `fields`.
    init()
    /// Reads or writes every field, as `fields` is reading or writing.
    mutating func fields(_ fields: inout RPCFields) throws(RPCError)
}

extension RPCObject {
    /// Read from a request's params (or an answer's result), with the -32602 errors that name
    /// the field; `bounds` are the daemon's limits some fields are checked against.
    public init(_ params: Params, bounds: RPCBounds = RPCBounds()) throws(RPCError) {
        self.init()
        var reader = RPCFields(reading: params, bounds: bounds)
        try fields(&reader)
    }

    /// Read from JSON (null or an object).
    public init(decoding json: JSON?, bounds: RPCBounds = RPCBounds()) throws(RPCError) {
        try self.init(Params(json), bounds: bounds)
    }

    /// Written as a JSON object.
    public var json: JSON {
        var copy = self
        var writer = RPCFields(writing: ())
        // Writing throws nothing: only a read can meet a value of the wrong shape.
        try? copy.fields(&writer)
        return .object(writer.written)
    }
}

/// A field's value that is not a plain string, integer or boolean: written as its JSON, read
/// back with an error that names the field.
public protocol RPCFieldValue: Equatable, Sendable {
    var json: JSON { get }
    /// `key` is the field's name as an error names it (`attachments[2]`, `link`).
    init(field: JSON, key: String) throws(RPCError)
}

/// The daemon's limits that some fields are checked against when read (its config sets them).
public struct RPCBounds: Equatable, Sendable {
    /// The most messages `conversation.attach` and `conversation.history` return.
    public var maxHistory: Int

    public init(maxHistory: Int = 1000) {
        self.maxHistory = maxHistory
    }
}

/// Reads or writes the fields of one object.
public struct RPCFields {
    /// What is read, when reading.
    private let params: Params?
    public let bounds: RPCBounds
    /// What has been written, when writing.
    public private(set) var written: [String: JSON] = [:]

    init(reading params: Params, bounds: RPCBounds) {
        self.params = params
        self.bounds = bounds
    }

    init(writing: Void) {
        params = nil
        bounds = RPCBounds()
    }

    public var isReading: Bool { params != nil }

    /// Whether the field is there at all (null included), when reading.
    public func isPresent(_ key: String) -> Bool { params?.members[key] != nil }

    // MARK: - Strings

    /// Required: missing or not a string is an error (null is "got null").
    public mutating func string(_ key: String, _ value: inout String) throws(RPCError) {
        guard let params else { return written[key] = .string(value) }
        value = try params.string(key)
    }

    /// Optional: missing and null are nil; nil is not written.
    public mutating func string(_ key: String, _ value: inout String?) throws(RPCError) {
        guard let params else {
            if let value { written[key] = .string(value) }
            return
        }
        value = try params.optionalString(key)
    }

    /// Optional, written as null when nil (a result's field that is always there).
    public mutating func nullableString(_ key: String, _ value: inout String?) throws(RPCError) {
        guard isReading else { return written[key] = JSON.optional(value) }
        try string(key, &value)
    }

    // MARK: - Booleans

    /// Required: missing or null is an error that says what to give.
    public mutating func bool(_ key: String, _ value: inout Bool) throws(RPCError) {
        guard isReading else { return written[key] = .bool(value) }
        var found: Bool?
        try bool(key, &found)
        guard let found else { throw .invalidParams("missing parameter \"\(key)\" (true or false)") }
        value = found
    }

    /// Optional: missing and null are nil; nil is not written.
    public mutating func bool(_ key: String, _ value: inout Bool?) throws(RPCError) {
        guard let params else {
            if let value { written[key] = .bool(value) }
            return
        }
        value = try params.optionalBool(key)
    }

    // MARK: - Integers

    /// Required: missing or null is an error.
    public mutating func int(_ key: String, _ value: inout Int, in range: ClosedRange<Int> = Int.min...Int.max) throws(RPCError) {
        guard isReading else { return written[key] = .int(value) }
        var found: Int?
        try int(key, &found, in: range)
        guard let found else { throw .invalidParams("missing parameter \"\(key)\"") }
        value = found
    }

    /// Optional: missing and null are nil; nil is not written. Outside `range` is an error.
    public mutating func int(_ key: String, _ value: inout Int?, in range: ClosedRange<Int> = Int.min...Int.max) throws(RPCError) {
        guard let params else {
            if let value { written[key] = .int(value) }
            return
        }
        value = try params.optionalInt(key, in: range)
    }

    // MARK: - Numbers

    /// Optional: missing and null are nil; nil is not written. An integer reads as a number.
    public mutating func double(_ key: String, _ value: inout Double?) throws(RPCError) {
        guard let members = params?.members else {
            if let value { written[key] = .double(value) }
            return
        }
        guard let found = members[key], !found.isNull else { return value = nil }
        guard let number = found.double, number.isFinite else { throw .invalidParams("parameter \"\(key)\" must be a number, got \(found.typeName)") }
        value = number
    }

    // MARK: - Values

    /// Required.
    public mutating func value<Value: RPCFieldValue>(_ key: String, _ value: inout Value) throws(RPCError) {
        guard let members = params?.members else { return written[key] = value.json }
        guard let found = members[key], !found.isNull else { throw .invalidParams("missing parameter \"\(key)\"") }
        value = try Value(field: found, key: key)
    }

    /// Optional: missing and null are nil; nil is not written.
    public mutating func value<Value: RPCFieldValue>(_ key: String, _ value: inout Value?) throws(RPCError) {
        guard let members = params?.members else {
            if let value { written[key] = value.json }
            return
        }
        guard let found = members[key], !found.isNull else { return value = nil }
        value = try Value(field: found, key: key)
    }

    /// Optional, written as null when nil.
    public mutating func nullableValue<Value: RPCFieldValue>(_ key: String, _ value: inout Value?) throws(RPCError) {
        guard isReading else { return written[key] = value?.json ?? .null }
        try self.value(key, &value)
    }

    /// An array of values; missing or null is empty, and empty is written.
    public mutating func values<Value: RPCFieldValue>(_ key: String, _ value: inout [Value]) throws(RPCError) {
        guard let members = params?.members else { return written[key] = .array(value.map(\.json)) }
        guard let found = members[key], !found.isNull else { return value = [] }
        guard case .array(let items) = found else { throw .invalidParams("parameter \"\(key)\" must be an array, got \(found.typeName)") }
        var read: [Value] = []
        read.reserveCapacity(items.count)
        for (index, item) in items.enumerated() { read.append(try Value(field: item, key: "\(key)[\(index)]")) }
        value = read
    }

    /// An array of values from the daemon, where an entry this version does not understand (a
    /// newer daemon's) is left out rather than failing the whole answer.
    public mutating func knownValues<Value: RPCFieldFromJSON>(_ key: String, _ value: inout [Value]) throws(RPCError) {
        guard let members = params?.members else { return written[key] = .array(value.map(\.json)) }
        guard let found = members[key], !found.isNull else { return value = [] }
        guard case .array(let items) = found else { throw .invalidParams("parameter \"\(key)\" must be an array, got \(found.typeName)") }
        value = items.compactMap(Value.init(json:))
    }

    /// Any JSON, as given (a setting's value, a tool's arguments); nil is not written.
    public mutating func json(_ key: String, _ value: inout JSON?) {
        guard let members = params?.members else {
            if let value { written[key] = value }
            return
        }
        value = members[key].flatMap { $0.isNull ? nil : $0 }
    }
}

// MARK: - Values of the protocol as fields

/// A type that is read from JSON by an optional initializer: a field that does not read is an
/// error naming it.
public protocol RPCFieldFromJSON: RPCFieldValue {
    init?(json: JSON)
    /// How an error says what the field should be.
    static var fieldShape: String { get }
}

extension RPCFieldFromJSON {
    public init(field: JSON, key: String) throws(RPCError) {
        guard let value = Self(json: field) else { throw .invalidParams("parameter \"\(key)\" must be \(Self.fieldShape)") }
        self = value
    }
}

extension ConversationInfo: RPCFieldFromJSON { public static var fieldShape: String { "a conversation" } }
extension Message: RPCFieldFromJSON { public static var fieldShape: String { "a message" } }
extension ClientInfo: RPCFieldFromJSON { public static var fieldShape: String { "a client" } }
extension Attachment: RPCFieldFromJSON { public static var fieldShape: String { "an attachment" } }
extension ListedTool: RPCFieldFromJSON { public static var fieldShape: String { "a tool" } }
extension ListedServer: RPCFieldFromJSON { public static var fieldShape: String { "an MCP server" } }

extension String: RPCFieldValue {
    public var json: JSON { .string(self) }
    public init(field: JSON, key: String) throws(RPCError) {
        guard let string = field.string else { throw .invalidParams("parameter \"\(key)\" must be a string, got \(field.typeName)") }
        self = string
    }
}

extension SamplingParameters: RPCFieldValue {
    /// Read as `conversation.create` and `conversation.configure` read `params`: each key's
    /// error named `params.KEY`.
    public init(field: JSON, key: String) throws(RPCError) {
        do {
            try self.init(json: field, prefix: "\(key).")
        } catch {
            throw .invalidParams("parameter \(error.message)")
        }
    }
}

/// Any object read into an `RPCObject` is a field value too (a nested object: `user`, `link`).
public protocol RPCNestedObject: RPCObject, RPCFieldValue {}

extension RPCNestedObject {
    public init(field: JSON, key: String) throws(RPCError) {
        guard case .object(let members) = field else { throw .invalidParams("parameter \"\(key)\" must be an object, got \(field.typeName)") }
        self.init()
        var reader = RPCFields(reading: Params(members: members), bounds: RPCBounds())
        try fields(&reader)
    }
}
