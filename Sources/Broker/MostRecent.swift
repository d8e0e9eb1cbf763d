/// The first `limit` of `items` in `conversation.list`'s order: most recently updated first, the
/// greater id first between equal times. One pass keeps the best `limit` so far in a heap whose
/// root is the worst of them, so 100 out of ten thousand costs about one comparison with the
/// root per item, where sorting all ten thousand cost some fourteen comparisons each.
func mostRecent<Item>(_ limit: Int, of items: some Collection<Item>, updated: (Item) -> Int64, id: (Item) -> String) -> [Item] {
    typealias Kept = (updated: Int64, item: Item)
    func before(_ a: Kept, _ b: Kept) -> Bool {
        a.updated != b.updated ? a.updated > b.updated : id(a.item) > id(b.item)
    }
    var heap: [Kept] = []
    heap.reserveCapacity(max(0, min(limit, items.count)))
    for item in items {
        let kept: Kept = (updated(item), item)
        if heap.count < limit {
            // Up from the bottom while it is worse than its parent.
            heap.append(kept)
            var child = heap.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard before(heap[parent], heap[child]) else { break }
                heap.swapAt(parent, child)
                child = parent
            }
        } else if let root = heap.first, before(kept, root) {
            // In place of the worst kept, then down while a child is worse.
            heap[0] = kept
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var worst = parent
                if left < heap.count, before(heap[worst], heap[left]) { worst = left }
                if right < heap.count, before(heap[worst], heap[right]) { worst = right }
                if worst == parent { break }
                heap.swapAt(parent, worst)
                parent = worst
            }
        }
    }
    return heap.sorted(by: before).map(\.item)
}
