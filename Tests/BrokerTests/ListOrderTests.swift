import XCTest

@testable import Broker

/// `conversation.list` answers from an order kept between calls, told of each change: after any
/// mix of changes, creations and deletions it must give exactly what sorting every conversation
/// and taking the first `limit` gives.
final class ListOrderTests: XCTestCase {
    private final class Item {
        var updated: Int64
        let id: String
        var isDeleted = false
        init(updated: Int64, id: String) {
            self.updated = updated
            self.id = id
        }
    }

    private func expected(_ items: [String: Item], _ limit: Int) -> [String] {
        Array(items.values.sorted { $0.updated != $1.updated ? $0.updated > $1.updated : $0.id > $1.id }.prefix(limit).map(\.id))
    }

    private func id(_ number: Int) -> String {
        let digits = String(number)
        return String(repeating: "0", count: 12 - digits.count) + digits
    }

    func testTheKeptOrderIsAlwaysWhatASortOfEverythingGives() {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<16 {
            let order = ListOrder<Item>(updated: \.updated, id: \.id, isGone: \.isDeleted)
            // Few distinct times in some rounds, so ties (broken by id) are common.
            let times: Int64 = round % 2 == 0 ? 5 : 1_000_000
            var items: [String: Item] = [:]
            var next = 0
            for _ in 0..<Int.random(in: 0...300, using: &generator) {
                items[id(next)] = Item(updated: .random(in: 0..<times, using: &generator), id: id(next))
                next += 1
            }
            for step in 0..<60 {
                switch Int.random(in: 0..<10, using: &generator) {
                case 0..<5:
                    // A write: the time moves on (or, read again, anywhere).
                    for _ in 0..<Int.random(in: 1...(step % 7 == 0 ? 80 : 3), using: &generator) {
                        guard let item = items.values.randomElement(using: &generator) else { break }
                        item.updated = step % 5 == 0 ? .random(in: 0..<times, using: &generator) : item.updated + .random(in: 0...2, using: &generator)
                        order.changed(item)
                    }
                case 5..<7:
                    let item = Item(updated: .random(in: 0..<times + 10, using: &generator), id: id(next))
                    next += 1
                    items[item.id] = item
                    order.changed(item)
                case 7:
                    if let item = items.values.randomElement(using: &generator) {
                        item.isDeleted = true
                        items[item.id] = nil
                        // Told in most rounds; when not, it must still be left out.
                        if round % 3 != 0 { order.changed(item) }
                    }
                default: break
                }
                for limit in [1, 3, 100, items.count, items.count + 5] where limit >= 1 {
                    XCTAssertEqual(order.first(limit, of: items.values).map(\.id), expected(items, limit),
                                   "round \(round), step \(step), \(items.count) items, limit \(limit)")
                }
            }
        }
    }
}
