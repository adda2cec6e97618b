import Foundation
import Logbook
import LogbookUpload

/// Delivers batches of entries to a syslog server as RFC 5424 messages, over plain TCP (RFC 6587
/// octet-counted frames) or RELP (acknowledged), reconnecting with the uploader's `RetryPolicy`
/// (its backoff and attempts: the one retry engine) when the server goes away.
///
/// Over RELP every message is acknowledged: a batch is delivered when all its messages are, and a
/// message not acknowledged when a connection broke is sent again on the next one (counted in
/// `resent`: the server may have taken it just before it went away, so each is a possible repeat).
/// Over plain TCP a batch is delivered when it was written on a connection still up after it; one
/// written on a connection found closed after it is written again on a new one and counted in
/// `resent` (the server may have read it before it closed). A server that goes down loses what its
/// kernel had received and it had not read (TCP syslog has no acknowledgements), which is why RELP
/// exists.
public final class SyslogDestination: @unchecked Sendable {
    public enum Transport: String, Sendable {
        /// RFC 6587 octet counting over TCP: no acknowledgements.
        case tcp
        /// RELP (rsyslog's imrelp, librelp): each message acknowledged.
        case relp
    }

    public let format: SyslogFormat
    public let policy: RetryPolicy
    public let transport: Transport
    private let connection: SyslogConnection
    private let relp: RELPSession
    private let lock = NSLock()

    /// - Parameters:
    ///   - host: the syslog server's host.
    ///   - port: the syslog server's port.
    ///   - transport: plain TCP (no acknowledgements) or RELP (every message acknowledged).
    ///   - format: how records become RFC 5424 messages.
    ///   - policy: when and how often a failed delivery is tried again.
    ///   - acknowledgementTimeout: RELP only: seconds to wait for an acknowledgement
    ///     before the session is given up and its unacknowledged messages sent on a new one.
    public init(host: String, port: UInt16, transport: Transport = .tcp, format: SyslogFormat,
                policy: RetryPolicy = .openTelemetry, acknowledgementTimeout: Double = 30) {
        self.format = format
        self.policy = policy
        self.transport = transport
        connection = SyslogConnection(host: host, port: port)
        relp = RELPSession(connection: connection, timeout: acknowledgementTimeout)
    }

    /// Called before each wait between attempts: the attempt that failed, why, and the seconds
    /// until the next. Set it before the first delivery.
    public var onRetry: (@Sendable (_ attempt: Int, _ reason: String, _ waitSeconds: Double) -> Void)?

    public enum Delivery: Sendable, Equatable {
        /// Every message delivered; `truncated` were cut to the format's maximum size (with the
        /// marker); `resent` were sent again on a new connection (possible repeats): over RELP
        /// those a connection broke before their acknowledgement, over TCP a batch written on a
        /// connection found closed after it.
        case delivered(attempts: Int, truncated: Int, resent: Int)
        /// The policy's attempts ran out (or the server refused a message: RELP), with the reason.
        case gaveUp(attempts: Int, reason: String)
        /// The server cannot take syslog messages this way (a RELP address that is no RELP server,
        /// or one that does not offer `syslog`): nothing of the batch was delivered, and trying
        /// again will not help until the configuration changes.
        case unusable(reason: String)
    }

    /// Sends the batch; on a broken or closed connection connects again (backoff from the policy)
    /// and sends what was not delivered.
    public func deliver(_ entries: some Collection<LogEntry>) async -> Delivery {
        // Every message of the batch into one buffer: no array per message.
        var messages = SyslogBatch()
        messages.ends.reserveCapacity(entries.count)
        var out = LineRenderer(capacity: max(4096, entries.count * 320))
        var truncated = 0
        for entry in entries {
            let cut = transport == .relp ? format.appendMessage(for: entry, to: &out) : format.appendFrame(for: entry, to: &out)
            if cut { truncated += 1 }
            messages.ends.append(out.bytes.count)
        }
        swap(&messages.bytes, &out.bytes)
        let firstSubmitted = Spool.wallClock()
        var attempt = 0
        var lastFailure = ""
        var delivered = 0  // from the first (RELP)
        var sentUnacknowledged = 0
        var resent = 0
        while true {
            attempt += 1
            let outcome: Result<Bool, RELPSession.Failure> = lock.withLock {
                switch transport {
                case .tcp:
                    if !connection.isConnected {
                        do { try connection.connect() } catch {
                            lastFailure = "\(error)"
                            return .success(false)
                        }
                    }
                    resent += sentUnacknowledged
                    if connection.send(messages.bytes) { return .success(true) }
                    // Written, then found closed: the server may have read some of it first.
                    sentUnacknowledged = connection.failedAfterWriting ? messages.count : 0
                    lastFailure = "the connection to \(connection.host):\(connection.port) closed"
                    return .success(false)
                case .relp:
                    if !relp.isUsable {
                        do { try relp.open() } catch RELPSession.Failure.protocolError(let why) where delivered == 0 {
                            return .failure(.protocolError(why))  // not a RELP server for syslog: trying again will not help
                        } catch {
                            lastFailure = "\(error)"
                            return .success(false)
                        }
                    }
                    resent += sentUnacknowledged
                    do {
                        let (acknowledged, sent) = try relp.send(messages, from: delivered)
                        sentUnacknowledged = sent - acknowledged  // those never written cannot repeat
                        delivered += acknowledged
                        if delivered == messages.count { return .success(true) }
                        lastFailure = "the RELP session with \(connection.host):\(connection.port) broke after \(delivered) of \(messages.count) messages"
                        return .success(false)
                    } catch let failure as RELPSession.Failure {
                        return .failure(failure)
                    } catch {
                        return .failure(.protocolError("\(error)"))
                    }
                }
            }
            switch outcome {
            case .success(true): return .delivered(attempts: attempt, truncated: truncated, resent: resent)
            case .success(false): break
            case .failure(.protocolError(let why)) where delivered == 0 && !relp.isUsable && attempt == 1: return .unusable(reason: why)
            case .failure(let failure): return .gaveUp(attempts: attempt, reason: "\(failure)")
            }
            // the one retry engine: a lost connection is a transport error to the policy
            let now = Spool.wallClock()
            switch policy.decideNow(.transportError(lastFailure), attempt: attempt, firstSubmittedNanoseconds: firstSubmitted) {
            case .retry(let at):
                onRetry?(attempt, lastFailure, Double(max(0, at - now)) / 1e9)
                if Task.isCancelled { return .gaveUp(attempts: attempt, reason: "cancelled") }
                do { try await Task.sleep(nanoseconds: UInt64(max(0, at - now))) } catch { return .gaveUp(attempts: attempt, reason: "cancelled") }
            case .gaveUp(let reason):
                return .gaveUp(attempts: attempt, reason: reason)
            case .expired:
                return .gaveUp(attempts: attempt, reason: "expired after \(attempt) attempts, the last: \(lastFailure)")
            case .delivered:
                return .delivered(attempts: attempt, truncated: truncated, resent: resent)  // not for a transport error
            }
        }
    }
}

/// The messages (or frames) of a batch in one buffer, each ending where `ends` says.
struct SyslogBatch {
    var bytes: [UInt8] = []
    /// Where each message ends in `bytes` (where the next begins).
    var ends: [Int] = []

    var count: Int { ends.count }

    /// The bytes of message `index`.
    func range(_ index: Int) -> Range<Int> { (index == 0 ? 0 : ends[index - 1])..<ends[index] }
}
