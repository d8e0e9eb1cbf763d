import ConfabProtocol
import DaemonSettings
import Posix
import TOML
import Tools
#if canImport(Glibc)
import Glibc
#endif

extension Settings {
    /// A `[tools.NAME]` table, checked: errors name the key and its line, and never show the
    /// value of a header read from the environment or a file.
    static func tool(_ section: ConfigFile.ToolSection, environment: [String: String],
                     warnings: inout [String]) throws(ConfigError) -> ToolDefinition {
        let table = section.table
        let name = section.name
        func tableError(_ at: ConfigTable, _ problem: String) -> ConfigError {
            let line = (at.position ?? at.table.members.first?.position).map { "\($0): " } ?? ""
            return ConfigError(description: "\(at.file): \(line)\(at.path) \(problem)")
        }
        guard ToolDefinition.isValidName(name) else {
            throw tableError(table, "is not a tool name: 1 to 64 letters, digits, - or _")
        }
        guard let description = section.description else {
            throw tableError(table, "needs a description: it tells the model what the tool does")
        }
        guard !description.trimmingWhitespace.isEmpty else { throw table.error("description", "must not be empty") }

        let parameters = try toolParameters(section)

        let approval: ToolApproval
        if let text = section.approval {
            guard let value = ToolApproval(rawValue: text) else {
                throw table.error("approval", "must be \"never\" or \"always\", not \"\(text)\"")
            }
            approval = value
        } else {
            approval = .never
        }

        guard let request = section.request else {
            throw tableError(table, "needs a request table with a url: [\(table.path).request]")
        }
        let requestTable = request.table
        let method: ToolHTTPMethod
        if let text = request.method {
            guard let value = ToolHTTPMethod(rawValue: text.uppercased()) else {
                let names = ToolHTTPMethod.allCases.map(\.rawValue)
                throw requestTable.error("method", "must be \(names.dropLast().joined(separator: ", ")) or \(names.last!), not \"\(text)\"")
            }
            method = value
        } else {
            method = .GET
        }
        guard let url = request.url else { throw tableError(requestTable, "needs a url") }
        try checkURL(url, of: requestTable, against: parameters)

        let headers = try Self.headers(in: requestTable, from: [
            ("headers", request.headers), ("header_env", request.header_env), ("header_file", request.header_file),
        ], environment: environment, warnings: &warnings)

        var timeout = ToolDefinition.defaultTimeoutSeconds
        if let seconds = request.timeout_seconds {
            guard (1...300).contains(seconds) else { throw requestTable.error("timeout_seconds", "must be between 1 and 300") }
            timeout = seconds
        }
        var maxResponseBytes = ToolDefinition.defaultMaxResponseBytes
        if let bytes = request.max_response_bytes {
            guard (1...16_777_216).contains(bytes) else { throw requestTable.error("max_response_bytes", "must be between 1 and 16777216") }
            maxResponseBytes = bytes
        }
        return ToolDefinition(name: name, description: description, parameters: parameters, method: method, url: url,
                              headers: headers, timeoutSeconds: timeout, maxResponseBytes: maxResponseBytes, approval: approval)
    }

    /// `parameters` (a TOML table) or `parameters_file` (JSON), one of them at most: a schema
    /// the daemon can check arguments against; none means the tool takes no arguments.
    private static func toolParameters(_ section: ConfigFile.ToolSection) throws(ConfigError) -> JSON {
        let table = section.table
        var parameters = ToolDefinition.noParameters
        if section.parameters != nil, section.parameters_file != nil {
            throw table.error("parameters_file", "cannot be given with parameters: the schema comes from one place")
        }
        if let value = section.parameters {
            guard case .table(let schema) = value else {
                throw table.error("parameters", "must be a table (a JSON Schema), not \(value.kindDescription)")
            }
            parameters = try json(from: schema, file: table.file, path: table.name("parameters"))
            if let problem = ToolSchema.problem(in: parameters) {
                throw table.error("parameters", "is not a usable schema: \(problem)")
            }
        } else if let path = section.parameters_file {
            let text: String
            do {
                text = try readText(path, "the schema file")
            } catch {
                throw table.error("parameters_file", "cannot be used: \(error)")
            }
            do {
                parameters = try JSON.parse(text)
            } catch {
                throw table.error("parameters_file", "cannot be used: \(path) holds \(error)")
            }
            if let problem = ToolSchema.problem(in: parameters) {
                throw table.error("parameters_file", "names a file that is not a usable schema: \(problem)")
            }
        }
        return parameters
    }

    /// The request's URL template: well formed, and each placeholder a required property.
    private static func checkURL(_ url: String, of requestTable: ConfigTable, against parameters: JSON) throws(ConfigError) {
        if let problem = ToolURLTemplate.problem(in: url) {
            throw requestTable.error("url", problem)
        }
        let properties = parameters["properties"]?.object ?? [:]
        let required = (parameters["required"]?.array ?? []).compactMap(\.string)
        for placeholder in ToolURLTemplate.placeholders(in: url) {
            guard properties[placeholder] != nil else {
                throw requestTable.error("url", "has the placeholder {\(placeholder)}, which is not a property of the parameters")
            }
            // An optional one could leave the URL with an empty piece where it was.
            guard required.contains(placeholder) else {
                throw requestTable.error("url", "has the placeholder {\(placeholder)}, which the parameters do not list as required")
            }
        }
    }

    /// A TOML table as a JSON object: tables are objects, and arrays, strings, integers,
    /// floats and booleans are themselves. Dates and times have no JSON type: an error at
    /// their line, as is a float that is not finite.
    static func json(from table: TOMLTable, file: String, path: String) throws(ConfigError) -> JSON {
        let names = ConfigTable(file: file, path: path, table: table)
        var object: [String: JSON] = [:]
        for member in table.members {
            object[member.key] = try json(from: member.value, file: file, name: names.name(member.key), position: member.position)
        }
        return .object(object)
    }

    private static func json(from value: TOMLValue, file: String, name: String, position: TOMLPosition) throws(ConfigError) -> JSON {
        switch value {
        case .table(let inner):
            return try json(from: inner, file: file, path: name)
        case .array(let elements):
            var array: [JSON] = []
            for (index, element) in elements.enumerated() {
                array.append(try json(from: element, file: file, name: "\(name)[\(index)]", position: position))
            }
            return .array(array)
        case .string(let text):
            return .string(text)
        case .integer(let number):
            guard let integer = Int(exactly: number) else { throw ConfigError(description: "\(file): \(position): \(name) is out of range") }
            return .int(integer)
        case .float(let number):
            guard number.isFinite else { throw ConfigError(description: "\(file): \(position): \(name) must be a finite number") }
            return .double(number)
        case .boolean(let flag):
            return .bool(flag)
        case .dateTime:
            throw ConfigError(description: "\(file): \(position): \(name) is a date or time, which JSON has no type for: write it as a string")
        }
    }
}

extension String {
    /// Without line breaks at the end: a file written by an editor or `echo` ends in one.
    var trimmingTrailingNewlines: String {
        var scalars = Substring(self).unicodeScalars
        while let last = scalars.last, last == "\n" || last == "\r" { scalars.removeLast() }
        return String(scalars)
    }
}
