import ConfabProtocol
import TOML

/// The `[client]` table of confab's config.toml: what the `confab` client itself is set to
/// (today, how attach tells the terminal that confab needs the person). One file holds it
/// with the daemon's tables: confabd checks `[client]` through this type at every load, as it
/// does `[web]`, and `confab attach` reads only `[client]`, through this same type. The client's
/// environment (`CONFAB_NOTIFY`, `CONFAB_NOTIFY_IDLE`) overrides what the file says.
public struct ClientSettings: Equatable, Sendable {
    /// What `notify` may say: the terminal notification kinds, and `auto`.
    public static let notifyChoices = ["osc9", "osc777", "bell", "off", "auto"]
    public static let keys = ["notify", "notify_idle_seconds"]
    /// The most `notify_idle_seconds` takes: a day.
    public static let maxIdleSeconds = 86_400

    /// One of `notifyChoices`; nil when the file does not say.
    public var notify: String?
    /// Seconds without a key pressed before a reply's end is notified; nil when the file does not say.
    public var notifyIdleSeconds: Int?

    public init(notify: String? = nil, notifyIdleSeconds: Int? = nil) {
        self.notify = notify
        self.notifyIdleSeconds = notifyIdleSeconds
    }

    /// A `[client]` that cannot be used, said with the file and the line.
    public struct Problem: Error, Equatable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// Reads `[client]` from a config file's text (`file` names it in messages); a file
    /// without the table gives nothing set.
    public init(configText: String, file: String) throws(Problem) {
        let root: TOMLTable
        do { root = try TOMLTable(parsing: configText) } catch { throw Problem("\(file): \(error)") }
        guard let value = root["client"] else {
            self.init()
            return
        }
        guard case .table(let table) = value else {
            let line = root.position(of: "client").map { "\($0): " } ?? ""
            throw Problem("\(file): \(line)client must be a table, not \(value.kindDescription)")
        }
        try self.init(client: table, file: file)
    }

    /// Reads the `[client]` table itself: every key known, of its type and in its range.
    public init(client table: TOMLTable, file: String) throws(Problem) {
        self.init()
        let present = Set(table.keys)
        var unknown: [String] = []
        for member in table.members {
            let at = "\(file): \(member.position): client.\(Self.shown(member.key))"
            switch (member.key, member.value) {
            case ("notify", .string(let choice)):
                guard Self.notifyChoices.contains(choice) else {
                    throw Problem("\(at) must be one of \(Self.notifyChoices.joined(separator: ", ")), not \"\(Self.shown(choice))\"")
                }
                notify = choice
            case ("notify_idle_seconds", .integer(let seconds)):
                guard seconds >= 0, seconds <= Int64(Self.maxIdleSeconds) else {
                    throw Problem("\(at) must be from 0 to \(Self.maxIdleSeconds), not \(seconds)")
                }
                notifyIdleSeconds = Int(seconds)
            case ("notify", _):
                throw Problem("\(at) must be a string, not \(member.value.kindDescription)")
            case ("notify_idle_seconds", _):
                throw Problem("\(at) must be an integer, not \(member.value.kindDescription)")
            default:
                let candidates = Self.keys.filter { !present.contains($0) }
                let guess = Typos.closest(to: member.key, among: candidates).map { "; did you mean client.\($0)?" } ?? ""
                unknown.append("client.\(Self.shown(member.key)) (\(member.position)\(guess))")
            }
        }
        if !unknown.isEmpty {
            throw Problem("\(file): unknown keys: \(unknown.joined(separator: ", "))")
        }
    }

    /// A key or value as a message may show it: control and format characters escaped, so
    /// nothing written in the file reaches a terminal as a sequence.
    static func shown(_ text: String) -> String {
        let plain = text.unicodeScalars.allSatisfy { scalar in
            ![.control, .format, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory) && scalar != "\""
        }
        return plain ? text : text.unicodeScalars.map { $0.escaped(asASCII: true) }.joined()
    }

}
