import ConfabProtocol
import EventLoop
import Posix
#if canImport(Glibc)
import Glibc
#endif

/// The index (`index.jsonl`, see `LogStore`): kept up to date after changes, written whole
/// through a temporary file, read and decoded at start-up.
extension LogStore {
    func indexChanged() {
        indexStale = true
        guard !indexWriteScheduled, !indexWriteInFlight else { return }
        indexWriteScheduled = true
        let timer = indexTimer ?? Timer(loop: loop)
        if indexTimer == nil {
            // The index is a cache: it must not keep a loop alive that has nothing else to do.
            timer.setKeepsLoopAlive(false)
            indexTimer = timer
        }
        timer.start(after: indexDelayMilliseconds) { [weak self] in self?.writeIndexInBackground() }
    }

    private func writeIndexInBackground() {
        indexWriteScheduled = false
        guard indexStale, !indexWriteInFlight else { return }
        indexStale = false
        indexWriteInFlight = true
        let entries = indexEntries()
        let path = indexPath
        indexWrites += 1
        let temporary = "\(indexPath).\(ThisProcess.id).\(indexWrites).tmp"
        loop.queueWork({ Self.writeIndex(entries, to: path, through: temporary) }, done: { [weak self] error in
            guard let self else { return }
            indexWriteInFlight = false
            if let error { onIndexProblem("cannot write the index: \(error)") }
            if indexStale {
                indexStale = false
                indexChanged()
            }
        })
    }

    /// Writes the index now, on this thread: for shutdown and tests.
    public func writeIndexNow() -> StoreError? {
        indexStale = false
        indexWrites += 1
        return Self.writeIndex(indexEntries(), to: indexPath, through: "\(indexPath).\(ThisProcess.id).\(indexWrites).tmp")
    }

    struct IndexEntry: Equatable, Sendable {
        var identity: FileIdentity
        var summary: LogSummary
    }

    private func indexEntries() -> [IndexEntry] {
        logs.values.compactMap { log in
            log.currentIdentity().map { IndexEntry(identity: $0, summary: log.summary) }
        }
    }

    /// Each entry is an array in this order (cheaper to read than an object: no keys to hash),
    /// and the first line names the fields, so the file still reads on its own with `jq`.
    static let indexFields: [String] = ["id", "size", "inode", "mtime_ns", "created_ms", "model", "header_title", "title",
                                        "updated_ms", "message_count", "resume", "system", "forked_from", "provider", "usage",
                                        "profile", "params", "shared", "blobs", "model_default"]
    static let indexFormat: JSON = ["type": "confab-index", "v": 1, "fields": .array(indexFields.map(JSON.string))]
    /// The format before `model_default`: still read (its lines lack the field, as its logs lack
    /// the flag), so a daemon of this version starts from an older one's index.
    static let indexFormatBeforeModelDefault: JSON = ["type": "confab-index", "v": 1, "fields": .array(indexFields.dropLast().map(JSON.string))]

    static func encode(_ entry: IndexEntry) -> JSON {
        let summary = entry.summary
        return .array([
            .string(summary.header.id), .int(Int(entry.identity.size)), .int(Int(truncatingIfNeeded: entry.identity.inode)),
            .int(Int(entry.identity.modifiedNanoseconds)), .int(Int(summary.header.created.milliseconds)),
            .string(summary.header.model), .string(summary.header.title), .string(summary.title),
            .int(Int(summary.updated.milliseconds)), .int(summary.messageCount), .bool(summary.needsResume),
            summary.header.system.map(JSON.string) ?? .null,
            summary.header.forkedFrom?.json ?? .null,
            summary.header.provider.map(JSON.string) ?? .null,
            .array([.int(summary.usage.promptTokens), .int(summary.usage.completionTokens), .int(summary.usage.totalTokens),
                    .int(summary.usage.estimatedReplies)]),
            summary.header.profile.map(JSON.string) ?? .null,
            summary.header.params.json,
            .array(summary.shares.map(\.json)),
            .array(summary.blobs.sorted().map(JSON.string)),
            .bool(summary.header.modelIsDefault),
        ])
    }

    /// One line of format, then one line per log, sorted by id; written whole to `temporary`
    /// and renamed over `path`, so a reader sees the old index or the new one.
    static func writeIndex(_ entries: [IndexEntry], to path: String, through temporary: String) -> StoreError? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entries.count * 256 + 64)
        indexFormat.write(into: &bytes)
        bytes.append(0x0A)
        for entry in entries.sorted(by: { $0.summary.header.id < $1.summary.header.id }) {
            encode(entry).write(into: &bytes)
            bytes.append(0x0A)
        }
        do {
            // A cache: not fsynced (see the type's comment).
            try Files.writeAtomically(path: path, bytes: bytes, temporary: temporary)
            return nil
        } catch {
            return StoreError(errno: error.errno.code, operation: "\(error.operation) \(error.path)")
        }
    }

    /// A daemon killed while writing the index leaves its temporary file behind.
    func removeUnfinishedIndexWrites() {
        let prefix = String(indexPath.split(separator: "/").last ?? "index.jsonl") + "."
        guard let names = try? Files.names(in: directory) else { return }
        for name in names where name.hasPrefix(prefix) && name.hasSuffix(".tmp") {
            try? Files.remove(directory + "/" + name)
        }
    }

    /// The index's entries sorted by id, one per id (the last line wins); empty (everything is
    /// read) when it is missing or not ours. Unreadable lines are skipped: their logs are read.
    /// Touches nothing but the file, so start-up runs it on a thread of its own while the logs
    /// are listed and `stat`ed.
    static func readIndex(at indexPath: String) -> (entries: [IndexEntry], problems: [LoadProblem]) {
        var problems: [LoadProblem] = []
        let bytes: [UInt8]
        do {
            bytes = try Files.readWhole(path: indexPath)
        } catch {
            if error.code != ENOENT {
                problems.append(LoadProblem(file: indexPath, line: nil, message: "cannot read the index (\(error)): reading every log"))
            }
            return ([], problems)
        }
        var entries: [IndexEntry] = []
        var sorted = true
        var unreadable = 0
        let known = bytes.withUnsafeBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return true }
            var start = 0
            var lineNumber = 0
            while start < buffer.count {
                let end = memchr(base + start, 0x0A, buffer.count - start).map { UnsafePointer<UInt8>($0.assumingMemoryBound(to: UInt8.self)) - base }
                    ?? buffer.count
                let line = UnsafeBufferPointer(rebasing: buffer[start..<end])
                start = end + 1
                lineNumber += 1
                if lineNumber == 1 {
                    guard let format = try? JSON.parse(line), format == Self.indexFormat || format == Self.indexFormatBeforeModelDefault else { return false }
                    // About 180 bytes a line: hashed once at its final size.
                    entries.reserveCapacity(buffer.count / 150)
                    continue
                }
                if line.isEmpty { continue }
                guard let entry = Self.decode(line: line) else {
                    unreadable += 1
                    continue
                }
                // The index is written in id order; anything else (an edit by hand) is sorted below.
                if let last = entries.last, last.summary.header.id >= entry.summary.header.id { sorted = false }
                entries.append(entry)
            }
            return lineNumber > 0
        }
        guard known else {
            problems.append(LoadProblem(file: indexPath, line: 1, message: "not an index this version reads: reading every log"))
            return ([], problems)
        }
        if !sorted {
            var byID: [String: IndexEntry] = [:]
            for entry in entries { byID[entry.summary.header.id] = entry }
            entries = byID.values.sorted { $0.summary.header.id < $1.summary.header.id }
        }
        if unreadable > 0 {
            problems.append(LoadProblem(file: indexPath, line: nil, message: "\(unreadable) unreadable lines: their logs are read"))
        }
        return (entries, problems)
    }

    /// One line of the index as `decode(JSON.parse(line))` reads it, straight from the bytes:
    /// no tree of values is built for the fields that are plain strings, numbers and nulls.
    static func decode(line: UnsafeBufferPointer<UInt8>) -> IndexEntry? {
        let read = try? JSONScanner.read(line) { (scanner) throws(JSONParseError) -> IndexLineFields in
            var f = IndexLineFields()
            guard try scanner.kind() == .array else {
                f.valid = false
                try scanner.skipValue()
                return f
            }
            try scanner.elements { (index, scanner) throws(JSONParseError) in
                f.count = index + 1
                guard f.valid else { return }
                if index < 14 { try f.readPlain(index, &scanner) } else { try f.readValue(index, &scanner) }
            }
            return f
        }
        // An index written before `model_default` lacks it: its logs had no such flag either.
        guard let f = read, f.valid, f.count == indexFields.count || f.count == indexFields.count - 1, ConversationID.isValid(f.id),
              f.messages >= 0 else { return nil }
        let header = ConversationHeader(id: f.id, created: Timestamp(milliseconds: Int64(f.created)), title: f.headerTitle, model: f.model,
                                        system: f.system, forkedFrom: f.forkedFrom, provider: f.provider, profile: f.profile, params: f.params,
                                        modelIsDefault: f.modelIsDefault)
        return IndexEntry(identity: FileIdentity(size: Int64(f.size), inode: UInt64(truncatingIfNeeded: f.inode), modifiedNanoseconds: Int64(f.modified)),
                          summary: LogSummary(header: header, title: f.title, updated: Timestamp(milliseconds: Int64(f.updated)),
                                              messageCount: f.messages, needsResume: f.resume, usage: f.usage, shares: f.shares,
                                              blobs: f.blobs))
    }

    /// An index line's fields as they are read, in `indexFields` order; `valid` false once one
    /// is not what its place holds (the line is then not taken).
    private struct IndexLineFields {
        var count = 0
        var valid = true
        var id = "", model = "", headerTitle = "", title = ""
        var size = 0, inode = 0, modified = 0, created = 0, updated = 0, messages = 0
        var resume = false
        var system: String?, provider: String?, profile: String?
        var forkedFrom: ForkOrigin?
        var usage = UsageTotals()
        var params = SamplingParameters()
        var shares: [ConversationShare] = []
        var blobs: Set<String> = []
        var modelIsDefault = false

        /// Fields 0 to 13: strings, numbers, a flag, nulls, the fork's origin.
        mutating func readPlain(_ index: Int, _ scanner: inout JSONScanner) throws(JSONParseError) {
            switch index {
            case 0: id = try string(&scanner)
            case 1: size = try int(&scanner)
            case 2: inode = try int(&scanner)
            case 3: modified = try int(&scanner)
            case 4: created = try int(&scanner)
            case 5: model = try string(&scanner)
            case 6: headerTitle = try string(&scanner)
            case 7: title = try string(&scanner)
            case 8: updated = try int(&scanner)
            case 9: messages = try int(&scanner)
            case 10:
                guard let flag = try scanner.readValue().bool else { return valid = false }
                resume = flag
            case 11: system = try optionalString(&scanner)
            case 12:
                if try scanner.readNull() { return }
                guard let origin = ForkOrigin(json: try scanner.readValue()) else { return valid = false }
                forkedFrom = origin
            default: provider = try optionalString(&scanner)
            }
        }

        /// Fields 14 on: the usage totals, the profile, the parameters, the shares, the blobs and
        /// whether the model follows the default; anything after them is not an index line.
        mutating func readValue(_ index: Int, _ scanner: inout JSONScanner) throws(JSONParseError) {
            switch index {
            case 14:
                guard let totals = LogStore.usageTotals(try scanner.readValue()) else { return valid = false }
                usage = totals
            case 15: profile = try optionalString(&scanner)
            case 16:
                guard let read = try? SamplingParameters(json: try scanner.readValue()) else { return valid = false }
                params = read
            case 17:
                guard let read = LogStore.shares(try scanner.readValue()) else { return valid = false }
                shares = read
            case 18:
                guard case .array(let digests) = try scanner.readValue() else { return valid = false }
                for digest in digests {
                    guard let digest = digest.string, Attachment.isDigest(digest) else { return valid = false }
                    blobs.insert(digest)
                }
            case 19:
                guard let flag = try scanner.readValue().bool else { return valid = false }
                modelIsDefault = flag
            default: valid = false
            }
        }

        private mutating func string(_ scanner: inout JSONScanner) throws(JSONParseError) -> String {
            guard let text = try scanner.readString() else {
                valid = false
                return ""
            }
            return text
        }

        private mutating func int(_ scanner: inout JSONScanner) throws(JSONParseError) -> Int {
            guard let value = try scanner.readInt() else {
                valid = false
                return 0
            }
            return value
        }

        private mutating func optionalString(_ scanner: inout JSONScanner) throws(JSONParseError) -> String? {
            if try scanner.readNull() { return nil }
            return try string(&scanner)
        }
    }

    /// The `shared` field: every entry a whole share, or the line is not taken.
    static func shares(_ json: JSON) -> [ConversationShare]? {
        guard case .array(let items) = json else { return nil }
        var shares: [ConversationShare] = []
        for item in items {
            guard let share = ConversationShare(json: item) else { return nil }
            shares.append(share)
        }
        return shares
    }

    static func usageTotals(_ json: JSON) -> UsageTotals? {
        guard case .array(let counts) = json, counts.count == 4, let prompt = counts[0].int, let completion = counts[1].int,
              let total = counts[2].int, let estimated = counts[3].int else { return nil }
        return UsageTotals(promptTokens: prompt, completionTokens: completion, totalTokens: total, estimatedReplies: estimated)
    }
}
