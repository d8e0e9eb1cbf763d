import ArgumentParser
import ConfabProtocol
import Terminal

struct Profiles: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "profiles",
        abstract: "List the profiles conversations can start from (confab new --profile NAME).")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Flag(help: "Print the profiles as JSON.") var json = false

    func run() throws {
        let connection = try Connection.start(socketPath, command: "profiles")
        let raw = try connection.call(.profilesList)
        let profiles = try Connection.read(ProfilesListCall.self, raw).profiles
        if json {
            Out.json(raw["profiles"] ?? .array([]))
        } else if profiles.isEmpty {
            Out.errorLine("no profiles: add [profiles.NAME] tables to confabd's config file")
        } else {
            Out.stdout(Self.table(profiles))
        }
    }

    /// One line per profile: `*` marks the default; the parameters as `key=value`.
    static func table(_ profiles: [ListedProfile]) -> String {
        let header = ["NAME", "PROVIDER", "MODEL", "PARAMETERS"]
        let rows = profiles.map { profile in
            let params = (profile.params.json.object ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.text)" }
            return [SafeText.singleLine(profile.name) + (profile.isDefault ? " *" : ""),
                    SafeText.singleLine(profile.provider),
                    SafeText.singleLine(profile.model ?? "-"),
                    SafeText.singleLine(params.isEmpty ? "-" : params.joined(separator: " "))]
        }
        var widths = header.map { DisplayWidth.of($0) }
        for row in rows {
            for column in 0..<(header.count - 1) { widths[column] = max(widths[column], DisplayWidth.of(row[column])) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                index == cells.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - DisplayWidth.of(cell) + 2)
            }.joined() + "\n"
        }
        return ([header] + rows).map(line).joined()
    }
}
