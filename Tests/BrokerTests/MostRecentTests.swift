import XCTest

@testable import Broker

/// `conversation.list` keeps the `limit` first conversations in a heap instead of sorting them all:
/// it must give exactly what sorting all of them and taking the first `limit` gave.
final class MostRecentTests: XCTestCase {
    private struct Item: Equatable {
        var updated: Int64
        var id: String
    }

    private func sortedPrefix(_ items: [Item], _ limit: Int) -> [Item] {
        Array(items.sorted { $0.updated != $1.updated ? $0.updated > $1.updated : $0.id > $1.id }.prefix(limit))
    }

    func testTheHeapGivesWhatASortOfEverythingGave() {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<200 {
            let count = Int.random(in: 0...300, using: &generator)
            // Few distinct times in some rounds, so ties (broken by id) are common.
            let times = round % 2 == 0 ? 5 : 1_000_000
            let items = (0..<count).map { number in
                let digits = String(number * 7919 % 1_000_003)
                return Item(updated: Int64.random(in: 0..<Int64(times), using: &generator),
                            id: String(repeating: "0", count: 12 - digits.count) + digits)
            }
            for limit in [1, 2, 7, 100, count, count + 5] where limit >= 1 {
                XCTAssertEqual(mostRecent(limit, of: items, updated: \.updated, id: \.id), sortedPrefix(items, limit),
                               "round \(round), \(count) items, limit \(limit)")
            }
        }
    }

    func testOrderedInputsEitherWay() {
        let items = (0..<1000).map { Item(updated: Int64($0), id: "k\($0)") }
        XCTAssertEqual(mostRecent(100, of: items, updated: \.updated, id: \.id), sortedPrefix(items, 100))
        XCTAssertEqual(mostRecent(100, of: items.reversed(), updated: \.updated, id: \.id), sortedPrefix(items, 100))
        XCTAssertEqual(mostRecent(3, of: [Item](), updated: \.updated, id: \.id), [])
    }
}
