import CLogbook
import Foundation
import LogbookTestKit
import Synchronization
import XCTest
@testable import Logbook

/// A thread per core spinning at normal priority until `stop()`: work at idle priority (SCHED_IDLE,
/// as the archiver's compressor) gets almost no CPU meanwhile, however fast the machine is.
final class CPUHogs: @unchecked Sendable {
    private let running = Locked(true)
    private let group = DispatchGroup()

    init() {
        for _ in 0..<max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) {
            group.enter()
            Thread.detachNewThread { [self] in
                var spins = 0
                while true {
                    spins &+= 1
                    if spins % 4096 == 0, !running.withLock({ $0 }) { break }
                }
                group.leave()
            }
        }
    }

    func stop() {
        running.withLock { $0 = false }
        group.wait()
    }
}
