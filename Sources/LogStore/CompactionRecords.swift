import ConfabProtocol

/// The `compaction` and `uncompaction` records (docs/protocol.md, "Logs"). A log written before
/// them has none, and reads as it always did; a daemon that does not know them skips them as
/// it skips any record it does not understand, and sends the whole history.
extension LogRecord {
    static func compactionRecord(_ compaction: Compaction) -> [String: JSON] {
        var object = compaction.fieldsJSON
        // The record's own `at` says when: `created` is only the wire's copy of it.
        object["created"] = nil
        object["tokens"] = nil
        object["type"] = "compaction"
        return object
    }

    static func compactionRecord(type: String, _ json: JSON) -> LogRecord? {
        if type == "uncompaction" { return .uncompaction }
        guard var compaction = Compaction(json: json) else { return nil }
        compaction.created = json["at"]?.string.flatMap(Timestamp.init(rfc3339:))
        return .compaction(compaction)
    }
}
