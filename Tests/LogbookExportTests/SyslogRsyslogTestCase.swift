import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookExport
import LogbookUpload
import LogbookTesting

/// What `SyslogRsyslogTests` and `SyslogRsyslogConcurrencyTests` share.
protocol SyslogRsyslogTestCase: XCTestCase {}

extension SyslogRsyslogTestCase {
    /// Retries fast (20-200 ms apart) and, for as long as a restart of rsyslog may take on a loaded
    /// machine, without giving up: a restart must never make these tests depend on its speed.
    var patientPolicy: RetryPolicy {
        RetryPolicy(retryableStatuses: [], baseDelay: .milliseconds(20), maxDelay: .milliseconds(200), maxAttempts: 3000)
    }

    /// Sends `count` messages in batches of 40 through `destination` while another thread restarts
    /// rsyslog `restarts` times: the sender asks for each restart after a number of batches and
    /// goes on sending while it happens (so batches meet a stopped or starting rsyslog, on any
    /// machine), and sends its last batch only after the last restart. Returns the entries and the
    /// deliveries, once rsyslog wrote what `written` needs and was stopped.
    func sendAcrossRestarts(_ rsyslog: Rsyslog, _ destination: SyslogDestination, count: Int, restarts: Int,
                                    until written: @escaping ([LogEntry], [String]) -> Bool)
        throws -> (entries: [LogEntry], deliveries: [SyslogDestination.Delivery]) {
        let capture = try LogCapture()
        let log = try capture.logger("net")
        for i in 0..<count { log.warning("message \(i) with \("héllo")", metadata: ["i": .init(i), "path": "/a]\"b"]) }
        let entries = try capture.entries()
        let batches = (entries.count + 39) / 40
        let restartAfter = (1...restarts).map { $0 * (batches - 1) / (restarts + 1) }  // spread over the batches
        let requested = DispatchSemaphore(value: 0)
        let restarted = DispatchSemaphore(value: 0)
        let restartFailure = Locked<String?>(nil)
        let restarter = Thread {
            for _ in 0..<restarts {
                requested.wait()
                rsyslog.stop()
                do { try rsyslog.start() } catch { restartFailure.withLock { $0 = "\(error)" } }
                restarted.signal()
            }
        }
        restarter.start()
        let deliveries = Locked<[SyslogDestination.Delivery]>([])
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            for batch in 0..<batches {
                if batch == batches - 1 { for _ in 0..<restarts { restarted.wait() } }
                let slice = entries[batch * 40..<min(entries.count, batch * 40 + 40)]
                let delivery = await destination.deliver(slice)
                deliveries.withLock { $0.append(delivery) }
                if restartAfter.contains(batch) { requested.signal() }
            }
            done.signal()
        }
        done.wait()
        XCTAssertNil(restartFailure.withLock { $0 })
        rsyslog.waitUntilWritten { _ in written(entries, rsyslog.bodies()) }
        rsyslog.stop()
        return (entries, deliveries.withLock { $0 })
    }
}
