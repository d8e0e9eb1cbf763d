import DaemonSettings
import Tools

extension Settings {
    /// The headers of a table that takes them as a tool's request does (a tool's `request`, an
    /// MCP server over HTTP): `headers` written inline (secret when the name is a credential's),
    /// `header_env` naming variables of confabd's environment and `header_file` naming files,
    /// both secret. Each header comes from one place; errors name the header's key and line,
    /// never a value read from the environment or a file. `sources`: the three keys as read.
    static func headers(in table: ConfigTable, from sources: [(key: String, given: [(key: String, value: String)]?)],
                        environment: [String: String], warnings: inout [String]) throws(ConfigError) -> [ToolHeader] {
        var headers: [ToolHeader] = []
        // Which list named each header first, by its name in lower case (HTTP ignores case).
        var givenIn: [String: String] = [:]
        for source in sources {
            guard let given = source.given, case .table(let inner)? = table.table[source.key] else { continue }
            // For errors at each header's own line.
            let list = ConfigTable(file: table.file, path: table.name(source.key), table: inner)
            for header in given {
                guard isHeaderName(header.key) else { throw list.error(header.key, "is not an HTTP header name") }
                if let first = givenIn[header.key.lowercased()] {
                    let place = first == source.key ? "once more in \(first)" : "in \(first) too"
                    throw list.error(header.key, "is given \(place): a header comes from one place")
                }
                givenIn[header.key.lowercased()] = source.key
                switch source.key {
                case "headers":
                    if let problem = headerProblem(name: header.key, value: header.value) { throw list.error(header.key, problem) }
                    headers.append(ToolHeader(name: header.key, value: header.value, isSecret: ToolHeader.namesCredential(header.key)))
                case "header_env":
                    let variable = header.value
                    guard !variable.isEmpty else { throw list.error(header.key, "must name an environment variable") }
                    guard let value = environment[variable], !value.isEmpty else {
                        throw list.error(header.key, "names \(variable), which is not set in confabd's environment")
                    }
                    guard isHeaderValue(value) else {
                        throw list.error(header.key, "names \(variable), whose value holds line breaks or control characters")
                    }
                    headers.append(ToolHeader(name: header.key, value: value, isSecret: true))
                default:
                    let path = header.value
                    let text: String
                    do {
                        text = try readText(path, "the header file")
                    } catch {
                        throw list.error(header.key, "cannot be used: \(error)")
                    }
                    let value = text.trimmingTrailingNewlines
                    guard !value.isEmpty else { throw list.error(header.key, "names \(path), which holds an empty value") }
                    guard isHeaderValue(value) else {
                        throw list.error(header.key, "names \(path), whose value holds line breaks or control characters")
                    }
                    // As ssh does for private keys; the value itself is never part of the message.
                    if Settings.isReadableByOthers(path) {
                        warnings.append("the header file \(path) (\(list.name(header.key))) can be read by others: chmod 600 \(path)")
                    }
                    headers.append(ToolHeader(name: header.key, value: value, isSecret: true))
                }
            }
        }
        return headers
    }
}
