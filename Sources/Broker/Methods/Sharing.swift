import ConfabProtocol
import LogStore
import Posix

/// `conversation.share` and `conversation.unshare`, and what a change of who may connect or see
/// a conversation does to the clients already there.
extension Broker {
    /// Shares the conversation with a user, or changes its role: a `share` record, durable
    /// before the result. Attached clients get `conversation.updated` (its `shared_with`).
    func share(_ conversation: Conversation, _ params: ShareParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        let user = try sharedUser(uid: params.uid, login: params.login)
        guard let role = ShareRole(rawValue: params.role) else {
            throw .invalidParams("parameter \"role\" must be \"read\" or \"write\"")
        }
        guard user.uid != UserAccount.overflowUID else {
            throw .invalidParams("uid \(user.uid) is the overflow uid: under PrivateUsers=yes every other user arrives as it, so sharing with it would share with everyone")
        }
        let share = ConversationShare(uid: user.uid, login: user.login, role: role)
        conversation.log.append([.shared(share)]) { [unowned self] error in
            if let error {
                logger.error("conversation=\(conversation.id) cannot store share: \(error)")
                respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed, the conversation was not shared: \(error)")))
                // The summary held the share from its write until the failed sync took it back:
                // a client of that uid that attached in between must not stay.
                if conversation.log.shares.role(of: share.uid) == nil {
                    detachAll(of: share.uid, from: conversation, by: client)
                }
                return
            }
            guard !conversation.isDeleted else { return respond(.failure(.notFound("no conversation \(conversation.id)"))) }
            logger.notice("conversation=\(conversation.id) shared with uid=\(share.uid) role=\(role.rawValue) client=\(client.id)")
            respond(.success(ShareResult(conversation: conversation.info, allowed: allowedUIDs.contains(share.uid)).json))
            conversation.broadcast(.conversationUpdated(conversation.info))
        }
    }

    /// Takes a user's share away: an `unshare` record. The user's clients are detached as soon
    /// as it is written (each gets `conversation.unshared`), before it is durable: access ends
    /// at once; the result waits for the disk.
    func unshare(_ conversation: Conversation, _ params: UnshareParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        let user = try sharedUser(uid: params.uid, login: params.login)
        guard conversation.log.shares.role(of: user.uid) != nil else {
            respond(.success(UnshareResult(conversation: conversation.info, unshared: false).json))
            return
        }
        conversation.log.append([.unshared(uid: user.uid)]) { [unowned self] error in
            if let error {
                logger.error("conversation=\(conversation.id) cannot store unshare: \(error)")
                respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed, the share was not taken away: \(error)")))
                return
            }
            guard !conversation.isDeleted else { return respond(.failure(.notFound("no conversation \(conversation.id)"))) }
            logger.notice("conversation=\(conversation.id) unshared uid=\(user.uid) client=\(client.id)")
            respond(.success(UnshareResult(conversation: conversation.info, unshared: true).json))
            conversation.broadcast(.conversationUpdated(conversation.info))
        }
        // The summary folded the record as it was written; a write that failed left the share.
        if conversation.log.shares.role(of: user.uid) == nil {
            detachAll(of: user.uid, from: conversation, by: client)
        }
    }

    /// The user a share names: `uid` or `login`, exactly one, never the owner.
    private func sharedUser(uid uidValue: Int?, login loginValue: String?) throws(RPCError) -> (uid: UInt32, login: String) {
        let uid: UInt32
        switch (uidValue, loginValue) {
        case (let number?, nil): uid = UInt32(number)
        case (nil, let login?):
            guard let known = UserAccount.uid(of: login) else { throw .invalidParams("parameter \"login\": no user \"\(login)\" on this system") }
            uid = known
        default: throw .invalidParams("name the user with exactly one of \"uid\" and \"login\"")
        }
        guard uid != ownUID else { throw .invalidParams("uid \(uid) owns the conversation already") }
        return (uid, UserAccount.login(of: uid) ?? String(uid))
    }

    /// Detaches every client of `uid` from the conversation, telling each why, and the others
    /// that it left.
    private func detachAll(of uid: UInt32, from conversation: Conversation, by owner: ClientSession) {
        for attached in conversation.attached where attached.credentials.uid == uid {
            let quiet = conversation.isQuiet(attached)
            guard conversation.detach(attached) else { continue }
            attached.attached.remove(conversation.id)
            attached.send(ServerNotification.conversation(conversation.id, .conversationUnshared(by: owner.info)).frame)
            if !quiet { conversation.broadcast(.clientDetached(attached.info)) }
            logger.info("conversation=\(conversation.id) client=\(attached.id) detached: unshared")
        }
    }

    /// After a reload: the connections of a uid `previous` listed and `access.allow_uids` no
    /// longer does close now.
    func closeClients(noLongerAllowedBy previous: Set<UInt32>) {
        let removed = previous.subtracting(allowedUIDs)
        guard !removed.isEmpty else { return }
        for client in clients.values where removed.contains(client.credentials.uid) {
            client.close(reason: "uid=\(client.credentials.uid) is no longer in access.allow_uids")
        }
    }

    /// `status` as another user sees it: the conversations shared with it, its own connections.
    func counts(visibleTo client: ClientSession) -> Counts {
        let uid = client.credentials.uid
        var counts = Counts(conversations: 0, clients: 0, streams: 0, queued: 0)
        for conversation in conversations.values where permission(of: client, on: conversation) != nil {
            counts.conversations += 1
            if conversation.active != nil { counts.streams += 1 }
            counts.queued += conversation.queuedCount
        }
        counts.clients = clients.values.filter { $0.credentials.uid == uid && $0.link?.id == client.link?.id }.count
        return counts
    }
}
