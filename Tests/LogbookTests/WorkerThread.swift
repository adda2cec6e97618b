import CLogbook
import Foundation
import LogbookTestKit
import Synchronization
import XCTest
@testable import Logbook

/// One thread that runs closures handed to it, one at a time, until the worker is released.
///
/// The thread holds its own state, not the worker: it referred to the worker `unowned` and, looping
/// after the worker was released at the end of the test, crashed the test process once on a busy
/// machine ("attempted to read an unowned reference but object ... was already destroyed").
final class WorkerThread: @unchecked Sendable {
    private final class State: @unchecked Sendable {
        let condition = NSCondition()
        var job: (() -> Void)?
        var finished = false
    }

    private let state = State()

    init() {
        let state = self.state
        Thread.detachNewThread {
            state.condition.lock()
            while true {
                while state.job == nil && !state.finished { state.condition.wait() }
                guard let work = state.job else { break }
                state.condition.unlock()
                work()
                state.condition.lock()
                state.job = nil
                state.condition.broadcast()
            }
            state.condition.unlock()
        }
    }

    deinit {
        state.condition.lock()
        state.finished = true
        state.condition.broadcast()
        state.condition.unlock()
    }

    /// Runs `body` on the worker thread and waits for it.
    func run(_ body: @escaping () -> Void) {
        state.condition.lock()
        state.job = body
        state.condition.broadcast()
        while state.job != nil { state.condition.wait() }
        state.condition.unlock()
    }
}
