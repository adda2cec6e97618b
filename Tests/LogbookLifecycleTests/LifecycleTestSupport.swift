import Foundation
import LogbookLifecycle
import LogbookTestKit
import ServiceLifecycle
import XCTest
@testable import Logbook
import Logging

/// A service that logs numbered records ("item N" with text of different lengths) until its
/// graceful shutdown or cancellation, then `drain` more, counting what it logged.
struct Worker: Service {
    let log: Logbook.Logger
    let drain: Int
    let written = Locked(0)

    func run() async throws {
        var next = 0
        func logOne() {
            log.info("\(next) item \(String(repeating: "i", count: next % 29))")
            next += 1
            written.withLock { $0 = next }
        }
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            for _ in 0..<100 { logOne() }
            try? await Task.sleep(for: .milliseconds(2))
        }
        for _ in 0..<drain { logOne() }
    }
}

/// A logger for the service group that says nothing below critical.
func quietLogger() -> Logging.Logger {
    var logger = Logging.Logger(label: "lifecycle-test")
    logger.logLevel = .critical
    return logger
}
