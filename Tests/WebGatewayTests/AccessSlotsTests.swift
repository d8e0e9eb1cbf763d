import WebGateway
import Synchronization
import Dispatch
import XCTest

final class AccessSlotsTests: XCTestCase {
    func testNoMoreThanTheLimitAtOnceAndAGivenSlotIsTakenAgain() {
        let slots = AccessSlots(limit: 4, perLink: 4, ownerReserved: 0)
        XCTAssertEqual((0..<6).map { _ in slots.take(link: nil) == nil }, [true, true, true, true, false, false])
        XCTAssertEqual(slots.inUse, 4, "a refused take leaves nothing taken")
        slots.give(link: nil)
        XCTAssertNil(slots.take(link: nil))
        XCTAssertEqual(slots.take(link: nil), .full(4))
        for _ in 0..<4 { slots.give(link: nil) }
        XCTAssertEqual(slots.inUse, 0)
    }

    func testOneLinkTakesNoMoreThanItsShareAndLinksLeaveTheOwnersPlaces() {
        // 64 pages in all, 16 per link, 8 only the owner's: the default bounds.
        let slots = AccessSlots(limit: 64, perLink: 16, ownerReserved: 8)
        XCTAssertEqual((0..<20).filter { _ in slots.take(link: "a") == nil }.count, 16)
        XCTAssertEqual(slots.take(link: "a"), .linkFull(16))
        XCTAssertEqual(slots.inUse(link: "a"), 16)
        // Three more links fill what links may take (56) …
        for link in ["b", "c"] { for _ in 0..<16 { XCTAssertNil(slots.take(link: link)) } }
        for _ in 0..<8 { XCTAssertNil(slots.take(link: "d")) }
        XCTAssertEqual(slots.take(link: "e"), .full(56))
        XCTAssertEqual(slots.take(link: "d"), .full(56))
        // … and the owner still has eight.
        XCTAssertEqual((0..<10).filter { _ in slots.take(link: nil) == nil }.count, 8)
        XCTAssertEqual(slots.inUse, 64)
        slots.give(link: "a")
        XCTAssertEqual(slots.inUse(link: "a"), 15)
        XCTAssertEqual(slots.take(link: "e"), .full(56), "a place a link gives back above the links' share is the owner's")
        XCTAssertNil(slots.take(link: nil))
    }

    func testAHoldGivesItsPlaceBackOnceWhetherReleasedOrDropped() {
        let slots = AccessSlots(limit: 2, perLink: 1, ownerReserved: 0)
        var hold: AccessSlots.Hold? = try? slots.hold(link: "a").get()
        XCTAssertNotNil(hold)
        XCTAssertEqual(slots.inUse(link: "a"), 1)
        hold?.release()
        hold?.release()
        XCTAssertEqual(slots.inUse, 0)
        hold = try? slots.hold(link: "a").get()
        XCTAssertEqual(slots.inUse, 1)
        hold = nil
        XCTAssertEqual(slots.inUse, 0, "a dropped hold gives its place back")
    }

    func testSlotsTakenFromManyThreadsNeverPassTheLimit() {
        let slots = AccessSlots(limit: 3, perLink: 3, ownerReserved: 0)
        let granted = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            if slots.take(link: "x") == nil { granted.add(1, ordering: .relaxed) }
        }
        XCTAssertEqual(granted.load(ordering: .relaxed), 3)
        XCTAssertEqual(slots.inUse, 3)
    }
}
