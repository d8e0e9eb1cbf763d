import ConfabProtocol
import Posix

/// What a browser may do, as its token says.
public enum WebAccess: Equatable, Sendable {
    /// The owner's link: everything the owner's terminal can do.
    case owner
    /// A share link: one conversation, with a role.
    case share(WebShare)

    public var canWrite: Bool {
        switch self {
        case .owner: return true
        case .share(let share): return share.role == .write
        }
    }

    public var isOwner: Bool { self == .owner }

    /// The share link's id; nil for the owner.
    public var linkID: String? {
        if case .share(let share) = self { return share.id }
        return nil
    }

    /// Whether this access may see the conversation at all.
    public func maySee(_ conversation: String) -> Bool {
        switch self {
        case .owner: return true
        case .share(let share): return share.conversation == conversation
        }
    }
}

public enum ShareRole: String, Sendable {
    case read, write
}

public struct WebShare: Equatable, Sendable {
    public var id: String
    public var token: String
    public var conversation: String
    public var role: ShareRole
    /// Seconds since the epoch.
    public var created: Int
    /// Seconds since the epoch; nil: until revoked.
    public var expires: Int?

    public func isValid(at now: Int) -> Bool {
        expires.map { now < $0 } ?? true
    }

    var json: JSON {
        var object: [String: JSON] = [
            "id": .string(id), "token": .string(token), "conversation": .string(conversation),
            "role": .string(role.rawValue), "created": .int(created),
        ]
        if let expires { object["expires"] = .int(expires) }
        return .object(object)
    }

    init?(json: JSON) {
        guard let id = json["id"]?.string, let token = json["token"]?.string,
              let conversation = json["conversation"]?.string,
              let role = json["role"]?.string.flatMap(ShareRole.init(rawValue:)),
              let created = json["created"]?.int else { return nil }
        self.init(id: id, token: token, conversation: conversation, role: role, created: created, expires: json["expires"]?.int)
    }

    public init(id: String, token: String, conversation: String, role: ShareRole, created: Int, expires: Int?) {
        self.id = id
        self.token = token
        self.conversation = conversation
        self.role = role
        self.created = created
        self.expires = expires
    }
}

/// The gateway's secrets, in files of mode 0600 in a directory of mode 0700: the owner's
/// token and the share links. The command line writes them (`confab web share`, `revoke`,
/// `rotate`) and the gateway reads them at every request, so a revocation or a rotation
/// takes effect at once without a signal.
public struct AccessStore: Sendable {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    /// `$XDG_STATE_HOME/confab/web`, else `~/.local/state/confab/web`.
    public static func defaultDirectory(environment: [String: String]) -> String {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/confab/web" }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "/"
        return home + "/.local/state/confab/web"
    }

    var ownerTokenPath: String { directory + "/owner-token" }
    var sharesPath: String { directory + "/shares.json" }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    private func prepareDirectory() throws(Failure) {
        var path = ""
        for component in directory.split(separator: "/") {
            path += "/" + component
            do { try Files.makeDirectory(path, mode: 0o700) } catch {
                throw Failure(description: "cannot make \(path): \(error)")
            }
        }
        // The last one is ours alone whatever made it.
        Files.setMode(directory, 0o700)
    }

    /// A new random token: 32 bytes from the system's secure generator, as hex.
    public static func newToken(bytes: Int = 32) -> String {
        var generator = SystemRandomNumberGenerator()
        var text = ""
        for _ in 0..<bytes {
            let byte = UInt8.random(in: 0...255, using: &generator)
            text += String(byte >> 4, radix: 16) + String(byte & 15, radix: 16)
        }
        return text
    }

    /// The owner's token, made on first use.
    public func ownerToken() throws(Failure) -> String {
        if let existing = try? Files.readAll(path: ownerTokenPath, limit: 4096) {
            let token = String(decoding: existing, as: UTF8.self).trimmingWhitespace
            if token.count >= 32 { return token }
        }
        return try rotateOwnerToken()
    }

    /// Replaces the owner's token: every browser holding the old one must visit the new URL.
    @discardableResult
    public func rotateOwnerToken() throws(Failure) -> String {
        try prepareDirectory()
        let token = Self.newToken()
        do { try Files.writeAtomically(path: ownerTokenPath, bytes: Array((token + "\n").utf8), mode: 0o600) } catch {
            throw Failure(description: "cannot write \(ownerTokenPath): \(error)")
        }
        return token
    }

    public func shares() -> [WebShare] {
        guard let bytes = try? Files.readAll(path: sharesPath, limit: 16 << 20),
              let json = try? JSON.parse(bytes), let list = json["shares"]?.array else { return [] }
        return list.compactMap(WebShare.init(json:))
    }

    private func save(_ shares: [WebShare]) throws(Failure) {
        try prepareDirectory()
        let json: JSON = ["shares": .array(shares.map(\.json))]
        do { try Files.writeAtomically(path: sharesPath, bytes: json.bytes + [10], mode: 0o600) } catch {
            throw Failure(description: "cannot write \(sharesPath): \(error)")
        }
    }

    public func createShare(conversation: String, role: ShareRole, expiresIn: Int?, now: Int = Self.now()) throws(Failure) -> WebShare {
        var all = shares().filter { $0.isValid(at: now) }
        var id = String(Self.newToken(bytes: 4))
        while all.contains(where: { $0.id == id }) { id = String(Self.newToken(bytes: 4)) }
        let share = WebShare(id: id, token: Self.newToken(), conversation: conversation, role: role,
                             created: now, expires: expiresIn.map { now + $0 })
        all.append(share)
        try save(all)
        return share
    }

    /// Removes the share with this id (or token); false when there is none.
    public func revoke(_ idOrToken: String) throws(Failure) -> Bool {
        let all = shares()
        let kept = all.filter { $0.id != idOrToken && $0.token != idOrToken }
        if kept.count == all.count { return false }
        try save(kept)
        return true
    }

    /// What a token gives, now; nil for no token, a wrong one, or a revoked or expired link.
    public func access(for token: String, now: Int = Self.now()) -> WebAccess? {
        guard !token.isEmpty else { return nil }
        if let owner = try? ownerToken(), Self.constantTimeEqual(owner, token) { return .owner }
        for share in shares() where Self.constantTimeEqual(share.token, token) {
            return share.isValid(at: now) ? .share(share) : nil
        }
        return nil
    }

    /// Seconds since the epoch.
    public static func now() -> Int { Int(Timestamp.now().milliseconds / 1000) }

    public static func constantTimeEqual(_ left: String, _ right: String) -> Bool {
        let a = Array(left.utf8)
        let b = Array(right.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<a.count { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
