import Foundation
import Logbook
import LogbookUpload

/// Delivers batches of entries to a syslog server over TCP (RFC 5424 in RFC 6587 octet-counted
/// frames), reconnecting with the uploader's `RetryPolicy` backoff when the server goes away. WORK
/// IN PROGRESS (issue 14; docs/EXPORT-PLAN.md): TCP syslog has no acknowledgements, so a restart of
/// the server can lose what its receive buffer held (see the plan).
public final class SyslogDestination: @unchecked Sendable {
    public let format: SyslogFormat
    public let policy: RetryPolicy
    private let connection: SyslogConnection
    private let lock = NSLock()

    public init(host: String, port: UInt16, format: SyslogFormat, policy: RetryPolicy = .openTelemetry) {
        self.format = format
        self.policy = policy
        connection = SyslogConnection(host: host, port: port)
    }

    public enum Delivery: Sendable, Equatable {
        /// Written on a connection that was still up after it; `truncated` messages were cut to
        /// the format's maximum size (with the marker).
        case delivered(attempts: Int, truncated: Int)
        case gaveUp(attempts: Int, reason: String)
    }

    /// Writes the batch's frames in one go; on a broken or closed connection, connects again
    /// (backoff from the policy) and writes the whole batch again.
    public func deliver(_ entries: some Collection<LogEntry>) async -> Delivery {
        var bytes: [UInt8] = []
        var truncated = 0
        for entry in entries {
            let (frame, cut) = format.frame(for: entry)
            bytes += frame
            if cut { truncated += 1 }
        }
        var random = SystemRandomNumberGenerator()
        var attempt = 0
        var lastFailure = ""
        while attempt < policy.maxAttempts {
            attempt += 1
            let sent: Bool = lock.withLock {
                if !connection.isConnected {
                    do { try connection.connect() } catch {
                        lastFailure = "\(error)"
                        return false
                    }
                }
                if connection.send(bytes) { return true }
                lastFailure = "the connection to \(connection.host):\(connection.port) closed"
                return false
            }
            if sent { return .delivered(attempts: attempt, truncated: truncated) }
            let wait = policy.backoff(afterAttempt: attempt, using: &random)
            do { try await Task.sleep(nanoseconds: UInt64(max(0, wait))) } catch { return .gaveUp(attempts: attempt, reason: "cancelled") }
        }
        return .gaveUp(attempts: attempt, reason: "\(attempt) attempts, the last: \(lastFailure)")
    }
}
