import ConfabProtocol
import WebGateway

/// What the gateway says in `hello` on each connection it opens to confabd: always that it is
/// the gateway's (the daemon counts those in a class of their own, bounded, never in the
/// owner's last slots), and, for a share link's page or download, which link it relays. From
/// then on the daemon treats the connection as that link's holder, not as the owner: the link's
/// role on its one conversation, every tool call held for the owner's yes, and `link:ID` as the
/// author of what it sends (docs/protocol.md, "Share links and the gateway").
enum DaemonHello {
    static func params(access: WebAccess, name: String) -> HelloParams {
        var params = HelloParams(client: "confab-web", name: name, gateway: true)
        if case .share(let share) = access {
            let role: ConfabProtocol.ShareRole = switch share.role {
            case .read: .read
            case .write: .write
            }
            params.link = LinkDeclaration(id: share.id, conversation: share.conversation, role: role)
        }
        return params
    }

    /// Why a daemon's answer to that `hello` must not be relied on, or nil: a daemon that did not
    /// take a link's declaration (one from before share links were its to know) would treat the
    /// page as the owner, so the page is not served.
    static func problem(with answer: HelloResult, access: WebAccess) -> String? {
        guard case .share(let share) = access else { return nil }
        guard answer.user.link?.id == share.id else {
            return "confabd did not take the share link's declaration (upgrade confabd)"
        }
        return nil
    }
}
