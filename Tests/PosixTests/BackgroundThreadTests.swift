import EventLoop
import XCTest
#if canImport(Glibc)
import Glibc
#endif

private func threadID() -> Int { Int(bitPattern: UInt(pthread_self())) }

final class BackgroundThreadTests: XCTestCase {
    /// The work runs on another thread at the nice value asked for, the loop thread's stays as
    /// it was, the result comes back on the loop thread once, and the loop then has nothing left.
    func testWorkRunsOnALowerPriorityThreadAndItsResultComesBackOnTheLoop() throws {
        let loop = try Loop()
        let loopThread = threadID()
        let before = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        var results: [(thread: Int, nice: Int32, deliveredOn: Int)] = []
        for _ in 0..<3 {
            loop.runOnBackgroundThread(nice: 10, { () -> [Int] in
                [threadID(), Int(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))]
            }, done: { values in
                results.append((values[0], Int32(values[1]), threadID()))
            })
        }
        loop.run()
        XCTAssertEqual(results.count, 3)
        for result in results {
            XCTAssertNotEqual(result.thread, loopThread)
            XCTAssertEqual(result.nice, 10)
            XCTAssertEqual(result.deliveredOn, loopThread)
        }
        XCTAssertEqual(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0), before)
        loop.close()
    }

    /// Closing the loop waits for a thread still at work (its async handle must outlive it) and
    /// delivers nothing.
    func testClosingTheLoopWaitsForAThreadStillWorking() throws {
        let loop = try Loop()
        let finished = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        defer { finished.deallocate() }
        finished.pointee = 0
        nonisolated(unsafe) let flag = finished
        var delivered = false
        loop.runOnBackgroundThread({ () -> Int in
            usleep(200_000)
            flag.pointee = 1
            return 1
        }, done: { _ in delivered = true })
        loop.close()
        XCTAssertEqual(finished.pointee, 1, "close returned before the thread ended")
        XCTAssertFalse(delivered)
    }
}
