import XCTest

@testable import Broker

/// The wait before a retry: the upstream's Retry-After (seconds, at most 300), else 1 s doubling
/// with each attempt, at most 30 s.
final class RetryDelayTests: XCTestCase {
    private func delay(_ attempt: Int, _ retryAfter: Int? = nil, base: UInt64 = 1000) -> UInt64 {
        ReplyRunner.retryDelayMilliseconds(attempt: attempt, retryAfterSeconds: retryAfter, base: base)
    }

    func testWithoutRetryAfterOneSecondDoublesUpToThirtySeconds() {
        XCTAssertEqual((1...8).map { delay($0) }, [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000])
        XCTAssertEqual(delay(64), 30000, "no shift past the width of the number")
        XCTAssertEqual(delay(Int.max), 30000)
        XCTAssertEqual(delay(1, base: 100), 100, "the base is the first wait")
        XCTAssertEqual(delay(3, base: 100), 400)
        XCTAssertEqual(delay(1, base: 90_000), 30000, "a base above the cap is the cap")
    }

    func testRetryAfterWinsAndIsCappedAtFiveMinutes() {
        XCTAssertEqual(delay(1, 7), 7000)
        XCTAssertEqual(delay(5, 7), 7000, "the attempt does not matter")
        XCTAssertEqual(delay(1, 300), 300_000)
        XCTAssertEqual(delay(1, 301), 300_000)
        XCTAssertEqual(delay(1, Int.max), 300_000)
        XCTAssertEqual(delay(1, 0), 0)
        XCTAssertEqual(delay(1, -5), 0, "a negative Retry-After is no wait, not a huge one")
    }
}
