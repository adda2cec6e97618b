import CLogbook
import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookCache

/// The cache from many threads: each message once in per-thread order, power durability with
/// threads, the limits by count and age, the reference implementation's surface.
final class MessageCacheConcurrencyTests: XCTestCase {
    typealias Event = MessageCacheTests.Event

    func testTheReferencesSurfaceAndMore() throws {
        let file = makeTemporaryDirectory(self) + "/events.cache"
        do {
            let cache = try MessageCache<Event>(file: file, maximumBytes: 16 << 10)
            XCTAssertTrue(cache.isEmpty)
            for number in 0..<1000 { try cache.append(message: Event(name: "event \(number)", number: number)) }
            let messages = try cache.messages()
            XCTAssertEqual(messages.last, Event(name: "event 999", number: 999))
            XCTAssertEqual(messages.map(\.number), Array((1000 - messages.count)..<1000), "the oldest went first, order kept")
            XCTAssertEqual(cache.count, messages.count)
            XCTAssertThrowsError(try cache.append(bytes: [UInt8](repeating: 0, count: 20 << 10))) { error in
                XCTAssertEqual((error as? LogbookError)?.errno, EMSGSIZE)
            }
        }
        let reopened = try MessageCache<Event>(file: file, maximumBytes: 16 << 10)
        XCTAssertEqual(try reopened.messages().last?.number, 999, "survives a reopen")
        var handled: UInt64 = 0
        var seen = 0
        try reopened.forEach { message in
            if seen < 10 { handled = message.sequence }
            seen += 1
        }
        try reopened.remove(through: handled)
        XCTAssertEqual(reopened.count, seen - 10)
        XCTAssertEqual(reopened.statistics.removed, 10)
        XCTAssertEqual(reopened.statistics.evictedToMakeRoom, 1000 - seen)
        XCTAssertEqual(reopened.statistics.nextSequence, 1000)
    }

    func testEightThreadsEachMessageOnceInPerThreadOrder() throws {
        let file = makeTemporaryDirectory(self) + "/threads.cache"
        let cache = try MessageCache<Event>(file: file, maximumBytes: 8 << 20)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for number in 0..<2000 { try! cache.append(message: Event(name: "t\(thread)", number: number)) }
        }
        var next = [String: Int]()
        for event in try cache.messages() {
            XCTAssertEqual(event.number, next[event.name, default: 0])
            next[event.name] = event.number + 1
        }
        XCTAssertEqual(next.count, 8)
        XCTAssertTrue(next.values.allSatisfy { $0 == 2000 })
    }

    /// Power durability with threads: each append returns after a sync covered it; threads share
    /// syncs (group commit) and every message is read back once, in per-thread order.
    func testPowerDurabilityWithThreads() throws {
        let file = makeTemporaryDirectory(self) + "/power.cache"
        let cache = try MessageCache<Event>(file: file, maximumBytes: 1 << 20, durability: .power)
        let threads = 4, appends = 40
        let done = DispatchGroup()
        for thread in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                for number in 0..<appends { try! cache.append(message: Event(name: "t\(thread)", number: number)) }
                done.leave()
            }
        }
        done.wait()
        var next = [String: Int]()
        for event in try cache.messages() {
            XCTAssertEqual(event.number, next[event.name, default: 0])
            next[event.name] = event.number + 1
        }
        XCTAssertEqual(next.count, threads)
        XCTAssertTrue(next.values.allSatisfy { $0 == appends })
        XCTAssertEqual(cache.statistics.messages, threads * appends)
    }

    func testLimitsByCountAndAgeAreCounted() throws {
        let dir = makeTemporaryDirectory(self)
        let counted = try MessageCache<Event>(file: dir + "/count.cache", maximumBytes: 1 << 20, maximumCount: 10)
        for number in 0..<25 { try counted.append(message: Event(name: "e", number: number)) }
        XCTAssertEqual(try counted.messages().map(\.number), Array(15..<25))
        XCTAssertEqual(counted.statistics.evictedByCount, 15)
        XCTAssertEqual(counted.statistics.firstSequence, 15)
        XCTAssertEqual(counted.statistics.nextSequence, 25)

        let aged = try MessageCache<Event>(file: dir + "/age.cache", maximumBytes: 1 << 20, maximumAge: .milliseconds(200))
        for number in 0..<5 { try aged.append(message: Event(name: "old", number: number)) }
        Thread.sleep(forTimeInterval: 0.4)
        try aged.append(message: Event(name: "new", number: 5))
        XCTAssertEqual(try aged.messages().map(\.number), [5])
        XCTAssertEqual(aged.statistics.evictedByAge, 5)
    }
}
