import WebGateway
import Synchronization
import Dispatch
import XCTest

final class DownloadSlotsTests: XCTestCase {
    func testNoMoreThanTheLimitAtOnceAndAGivenSlotIsTakenAgain() {
        let slots = DownloadSlots(limit: 4)
        XCTAssertEqual((0..<6).map { _ in slots.take() }, [true, true, true, true, false, false])
        XCTAssertEqual(slots.inUse, 4, "a refused take leaves nothing taken")
        slots.give()
        XCTAssertTrue(slots.take())
        XCTAssertFalse(slots.take())
        for _ in 0..<4 { slots.give() }
        XCTAssertEqual(slots.inUse, 0)
    }

    func testSlotsTakenFromManyThreadsNeverPassTheLimit() {
        let slots = DownloadSlots(limit: 3)
        let granted = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            if slots.take() { granted.add(1, ordering: .relaxed) }
        }
        XCTAssertEqual(granted.load(ordering: .relaxed), 3)
        XCTAssertEqual(slots.inUse, 3)
    }
}
