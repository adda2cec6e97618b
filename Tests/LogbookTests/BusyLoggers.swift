import CLogbook
import Foundation
import LogbookTestKit
import Synchronization
import XCTest
@testable import Logbook

/// Threads that log `t<thread> n<n> <padding>` without a pause until `finish()`, the padding's
/// length given per thread and number. `paused` holds them between two records. `made` is each
/// thread's calls so far (each a record or a counted drop).
final class BusyLoggers: Sendable {
    let threads: Int
    let padding: @Sendable (Int, Int) -> Int
    let paused = Atomic<Bool>(false)
    private let stop = Atomic<Bool>(false)
    private let calls: [Counter]
    private let group = DispatchGroup()

    private final class Counter: Sendable { let value = Atomic<Int>(0) }

    init(_ log: Logger, threads: Int, padding: @escaping @Sendable (Int, Int) -> Int) {
        self.threads = threads
        self.padding = padding
        calls = (0..<threads).map { _ in Counter() }
        for thread in 0..<threads {
            group.enter()
            Thread.detachNewThread { [self] in
                var n = 0
                while !stop.load(ordering: .relaxed) {
                    if paused.load(ordering: .relaxed) {
                        usleep(200)
                        continue
                    }
                    log.info("t\(thread) n\(n) \(String(repeating: "x", count: padding(thread, n)))")
                    n += 1
                    calls[thread].value.store(n, ordering: .releasing)
                }
                group.leave()
            }
        }
    }

    var made: [Int] { calls.map { $0.value.load(ordering: .acquiring) } }

    /// Stops the threads and waits for them: their calls.
    @discardableResult
    func finish() -> [Int] {
        stop.store(true, ordering: .relaxed)
        group.wait()
        return made
    }

    /// The numbers of each thread's entries among `entries`, each checked for its padding and seen
    /// once.
    func numbers(in entries: some Sequence<LogEntry>, _ context: String,
                 file: StaticString = #filePath, line: UInt = #line) -> [Set<Int>] {
        var seen = [Set<Int>](repeating: [], count: threads)
        for entry in entries {
            let parts = entry.message.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, let thread = Int(parts[0].dropFirst()), thread < threads,
                  let n = Int(parts[1].dropFirst())
            else {
                XCTFail("\(context): \(entry.message.prefix(40))", file: file, line: line)
                continue
            }
            XCTAssertEqual(parts[2].count, padding(thread, n), "\(context): t\(thread) n\(n)", file: file, line: line)
            XCTAssertTrue(seen[thread].insert(n).inserted, "\(context): t\(thread) n\(n) twice", file: file, line: line)
        }
        return seen
    }
}
