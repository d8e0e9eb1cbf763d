/// `conversation.list`'s order (most recently updated first, the greater id first between equal
/// times), kept between calls. Reading every conversation's time means touching every
/// conversation object: with ten thousand of them scattered over the heap that is mostly cache
/// misses, milliseconds per call. So the order is kept, with each conversation's time and id
/// beside it, and a call reads only the conversations changed since (`changed`), merging them
/// in, and the first `limit` it lists. When many have changed it is rebuilt.
final class ListOrder<Item: AnyObject> {
    typealias Entry = (updated: Int64, id: String, item: Item)
    private let updated: (Item) -> Int64
    private let id: (Item) -> String
    /// Whether an item has left (deleted): it is skipped wherever it still stands.
    private let isGone: (Item) -> Bool
    private var sorted: [Entry] = []
    private var isBuilt = false
    /// Items whose entry in `sorted` may be out of date or missing: changed since, or new.
    private var stale: [ObjectIdentifier: Item] = [:]

    init(updated: @escaping (Item) -> Int64, id: @escaping (Item) -> String, isGone: @escaping (Item) -> Bool) {
        self.updated = updated
        self.id = id
        self.isGone = isGone
    }

    /// The item's time changed, or it is new, or gone: read it again at the next call.
    func changed(_ item: Item) {
        if isBuilt { stale[ObjectIdentifier(item)] = item }
    }

    private static func before(_ a: Entry, _ b: Entry) -> Bool {
        a.updated != b.updated ? a.updated > b.updated : a.id > b.id
    }

    private func entry(_ item: Item) -> Entry { (updated(item), id(item), item) }

    /// The first `limit` of `items` (every item there is) in list order.
    func first(_ limit: Int, of items: some Collection<Item>) -> [Item] {
        if !isBuilt || stale.count > max(64, sorted.count / 8) {
            sorted = items.map(entry)
            sorted.sort(by: Self.before)
            stale = [:]
            isBuilt = true
        }
        // The changed ones at their new places, merged with the rest as they stood.
        let fresh = stale.values.filter { !isGone($0) }.map(entry).sorted(by: Self.before)
        var result: [Item] = []
        result.reserveCapacity(min(limit, sorted.count + fresh.count))
        var old = 0, new = 0
        while result.count < limit {
            while old < sorted.count, stale[ObjectIdentifier(sorted[old].item)] != nil || isGone(sorted[old].item) { old += 1 }
            if old < sorted.count, new == fresh.count || Self.before(sorted[old], fresh[new]) {
                result.append(sorted[old].item)
                old += 1
            } else if new < fresh.count {
                result.append(fresh[new].item)
                new += 1
            } else {
                break
            }
        }
        return result
    }
}
