import Foundation
import XCTest
import Logbook
import LogbookCache

/// The Swift message cache (work in progress): the reference's surface (append, messages, isEmpty,
/// overwrite and reject, too large, order, reopen), raw bytes and the consumer cursor, threads.
final class MessageCacheTests: XCTestCase {
    struct Event: Codable, Equatable {
        var name: String
        var number: Int
    }

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
    }

    func testErrorsSayWhatWasWrong() throws {
        let dir = makeTemporaryDirectory(self)
        let first = try MessageCache<Event>(file: dir + "/one.cache", maximumBytes: 16 << 10)
        XCTAssertThrowsError(try MessageCache<Event>(file: dir + "/one.cache", maximumBytes: 16 << 10)) { error in
            XCTAssertTrue("\(error)".contains("another process writes to the cache"), "\(error)")
        }
        XCTAssertThrowsError(try MessageCache<Event>(file: dir + "/small.cache", maximumBytes: 100)) { error in
            XCTAssertTrue("\(error)".contains("under the minimum of 8192"), "\(error)")
        }
        try Data(repeating: 7, count: 16 << 10).write(to: URL(fileURLWithPath: dir + "/garbage.cache"))
        XCTAssertThrowsError(try MessageCache<Event>(file: dir + "/garbage.cache", maximumBytes: 16 << 10)) { error in
            XCTAssertTrue("\(error)".contains("is not a Logbook cache"), "\(error)")
        }
        _ = first
    }

    func testAFullCacheThatDoesNotOverwriteRefuses() throws {
        let cache = try MessageCache<Event>(file: makeTemporaryDirectory(self) + "/reject.cache", maximumBytes: 8192,
                                            shouldOverwriteOldMessages: false)
        var appended = 0
        XCTAssertThrowsError(try {
            while true {
                try cache.append(message: Event(name: "x", number: appended))
                appended += 1
            }
        }()) { error in XCTAssertEqual((error as? LogbookError)?.errno, ENOSPC) }
        XCTAssertEqual(try cache.messages().map(\.number), Array(0..<appended))
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
}
