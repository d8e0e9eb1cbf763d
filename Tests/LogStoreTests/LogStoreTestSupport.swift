import ConfabProtocol
@testable import LogStore

extension LogStore {
    /// Reads every log in full, as start-up did before the index (the tests' way to see what a
    /// full read of each log finds). A torn last line (a crash
    /// mid-append) is reported and cut off so the next append starts on a clean line; an
    /// unreadable line elsewhere is reported and skipped. Replies left streaming by a crash are
    /// finished as `interrupted`, durably. `progress` is told how many logs are read out of how
    /// many, before the first and after each.
    func loadAll(progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }) -> (loaded: [Loaded], problems: [LoadProblem]) {
        var loaded: [Loaded] = []
        var problems: [LoadProblem] = []
        let ids: [String]
        do {
            ids = try logIDs(problems: &problems)
        } catch {
            problems.append(LoadProblem(file: conversationsDirectory, line: nil, message: "\(error)"))
            return ([], problems)
        }
        progress(0, ids.count)
        for (index, id) in ids.enumerated() {
            if let item = load(id: id, problems: &problems) { loaded.append(item) }
            progress(index + 1, ids.count)
        }
        return (loaded, problems)
    }

    /// An index line read as a tree of values: the reference `decode(line:)`, which reads the
    /// same fields straight from the bytes, is checked against.
    static func decode(_ json: JSON) -> IndexEntry? {
        guard case .array(let fields) = json, fields.count == indexFields.count || fields.count == indexFields.count - 1,
              let id = fields[0].string, ConversationID.isValid(id), let size = fields[1].int, let inode = fields[2].int,
              let modified = fields[3].int, let created = fields[4].int, let model = fields[5].string,
              let headerTitle = fields[6].string, let title = fields[7].string,
              let updated = fields[8].int, let count = fields[9].int, count >= 0, let resume = fields[10].bool else { return nil }
        var system: String?
        if fields[11] != .null {
            guard let text = fields[11].string else { return nil }
            system = text
        }
        var forkedFrom: ForkOrigin?
        if fields[12] != .null {
            guard let origin = ForkOrigin(json: fields[12]) else { return nil }
            forkedFrom = origin
        }
        var provider: String?
        if fields[13] != .null {
            guard let name = fields[13].string else { return nil }
            provider = name
        }
        guard let usage = usageTotals(fields[14]) else { return nil }
        var profile: String?
        if fields[15] != .null {
            guard let name = fields[15].string else { return nil }
            profile = name
        }
        guard let params = try? SamplingParameters(json: fields[16]) else { return nil }
        guard let shares = Self.shares(fields[17]) else { return nil }
        guard case .array(let digests) = fields[18] else { return nil }
        var blobs: Set<String> = []
        for digest in digests {
            guard let digest = digest.string, Attachment.isDigest(digest) else { return nil }
            blobs.insert(digest)
        }
        var modelIsDefault = false
        if fields.count == indexFields.count {
            guard let flag = fields[19].bool else { return nil }
            modelIsDefault = flag
        }
        let header = ConversationHeader(id: id, created: Timestamp(milliseconds: Int64(created)), title: headerTitle, model: model,
                                        system: system, forkedFrom: forkedFrom, provider: provider, profile: profile, params: params,
                                        modelIsDefault: modelIsDefault)
        return IndexEntry(identity: FileIdentity(size: Int64(size), inode: UInt64(truncatingIfNeeded: inode), modifiedNanoseconds: Int64(modified)),
                          summary: LogSummary(header: header, title: title, updated: Timestamp(milliseconds: Int64(updated)),
                                              messageCount: count, needsResume: resume, usage: usage, shares: shares, blobs: blobs))
    }
}
