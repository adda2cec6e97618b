import Foundation
import CLogbookGzip
import LogbookUpload

/// Delivers OTLP/HTTP bodies (protobuf or JSON: ``contentType``) to a collector's `/v1/logs`, through the uploader's
/// `RetryPolicy` (`.openTelemetry`: 429, 502, 503 and 504 and lost connections are retried,
/// `Retry-After` honoured; anything else is not, and is reported with the server's message).
public struct OTLPDestination: Sendable {
    public var url: URL
    public var headers: [String: String]
    public var policy: RetryPolicy
    /// The one HTTP layer's bounds on an attempt: its body may go this long without a byte sent,
    /// and the whole answer must come within this long of the request's end (a collector that
    /// trickles its answer cannot hold the export longer; only its body's first 64 KiB are read).
    public var timeout: Duration
    /// How bodies are compressed (`Content-Encoding`), or nil for not at all.
    public var compression: Compression?
    /// gzip level (1–9) for `Content-Encoding: gzip`, or nil for none (``compression``'s gzip).
    public var gzipLevel: Int? {
        get { if case .gzip(let level) = compression { level } else { nil } }
        set { compression = newValue.map { .gzip(level: min(9, max(1, $0))) } }
    }

    /// A body's `Content-Encoding`. Collectors take both (the OpenTelemetry Collector's OTLP
    /// receiver, Vector, Fluent Bit). zstd at level 1 costs the exporter about a fourth of what
    /// gzip at level 6 does (`Benchmarks/export.sh`).
    public enum Compression: Sendable, Equatable {
        /// RFC 1952, level 1 (fastest) to 9 (smallest).
        case gzip(level: Int)
        /// RFC 8878, one frame with its size and checksum, level 1 (fastest) to 19 (smallest).
        case zstd(level: Int)

        /// The `Content-Encoding` header's value.
        public var contentEncoding: String {
            switch self {
            case .gzip: "gzip"
            case .zstd: "zstd"
            }
        }
    }
    /// The `Content-Type` of the bodies it is given (the encoding's, ``OTLPLogsEncoding/Format``).
    public var contentType: String = OTLPLogsEncoding.Format.protobuf.contentType
    /// The uploader's HTTP layer: keep-alive connections, reused from batch to batch.
    private let transport = HTTPTransport()

    public init(url: URL, headers: [String: String] = [:], policy: RetryPolicy = .openTelemetry, timeout: Duration = .seconds(30),
                gzipLevel: Int? = nil) {
        self.url = url
        self.headers = headers
        self.policy = policy
        self.timeout = timeout
        self.gzipLevel = gzipLevel
    }

    public init(url: URL, headers: [String: String] = [:], policy: RetryPolicy = .openTelemetry, timeout: Duration = .seconds(30),
                compression: Compression?) {
        self.init(url: url, headers: headers, policy: policy, timeout: timeout)
        switch compression {
        case .gzip(let level): self.compression = .gzip(level: min(9, max(1, level)))
        case .zstd(let level): self.compression = .zstd(level: min(19, max(1, level)))
        case nil: self.compression = nil
        }
    }

    /// `body` compressed as `compression` says, nil when it could not be.
    static func compress(_ body: [UInt8], _ compression: Compression) -> [UInt8]? {
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        let rc = body.withUnsafeBytes { buffer in
            switch compression {
            case .gzip(let level): lb_gzip(buffer.baseAddress, buffer.count, Int32(level), &out, &length)
            case .zstd(let level): lb_zstd(buffer.baseAddress, buffer.count, Int32(level), &out, &length)
            }
        }
        guard rc == 0, let out else { return nil }
        defer { free(out) }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }

    /// How a batch ended.
    public enum Delivery: Sendable, Equatable {
        /// Accepted; `rejected` records the collector refused in a partial success (counted, not
        /// retried), with its message.
        case delivered(attempts: Int, rejected: Int64, message: String?)
        /// Not retried (a status the policy does not retry, or its limits): the reason, with the
        /// server's message when it sent one.
        case gaveUp(attempts: Int, reason: String)
        case expired(attempts: Int)
        /// 413: the collector takes no body this large (the exporter halves the batch; a record
        /// too large alone is given up and reported).
        case tooLarge(attempts: Int, reason: String)
    }

    /// Called before each wait between attempts: the attempt that failed, why, and the seconds
    /// until the next (the CLI prints it, so that a collector that is down does not look like a hang).
    public var onRetry: (@Sendable (_ attempt: Int, _ reason: String, _ waitSeconds: Double) -> Void)?

    static func describe(_ outcome: AttemptOutcome) -> String {
        switch outcome {
        case .status(let status, let retryAfter): "HTTP \(status)" + (retryAfter.map { " (Retry-After: \($0))" } ?? "")
        case .transportError(let text): text
        case .timedOut: "timed out"
        }
    }

    /// Sends `body` until it is delivered or the policy gives up; waits between attempts with
    /// `Task.sleep` (cancellation ends the wait and the delivery: `gaveUp` with "cancelled").
    public func deliver(_ body: [UInt8], firstSubmittedNanoseconds: Int64? = nil) async -> Delivery {
        let first = firstSubmittedNanoseconds ?? Spool.wallClock()
        var body = body, encoding: String?
        if let compression, let compressed = Self.compress(body, compression) {
            body = compressed
            encoding = compression.contentEncoding
        }
        var attempt = 0
        while true {
            if policy.isExpired(firstSubmittedNanoseconds: first, nowNanoseconds: Spool.wallClock()) { return .expired(attempts: attempt) }
            attempt += 1
            let (outcome, answer) = await send(body, attempt: attempt, encoding: encoding)
            switch policy.decideNow(outcome, attempt: attempt, firstSubmittedNanoseconds: first) {
            case .delivered:
                let partial = Self.partialSuccess(answer)
                return .delivered(attempts: attempt, rejected: partial.rejected, message: partial.message)
            case .gaveUp(let reason):
                let message = Self.serverMessage(answer)
                let words = message.map { "\(reason): \($0)" } ?? reason
                if case .status(413, _) = outcome { return .tooLarge(attempts: attempt, reason: words) }
                return .gaveUp(attempts: attempt, reason: words)
            case .expired:
                return .expired(attempts: attempt)
            case .retry(let at):
                // A cancelled delivery ends here, with no "trying again" said.
                if Task.isCancelled { return .gaveUp(attempts: attempt, reason: "cancelled") }
                let wait = max(0, at - Spool.wallClock())
                onRetry?(attempt, Self.describe(outcome), Double(wait) / 1e9)
                do { try await Task.sleep(nanoseconds: UInt64(wait)) } catch { return .gaveUp(attempts: attempt, reason: "cancelled") }
            }
        }
    }

    /// One POST through the uploader's HTTP layer (a keep-alive connection, reused by the next batch).
    func send(_ body: [UInt8], attempt: Int, encoding: String?) async -> (AttemptOutcome, Data?) {
        var request = DeliveryRequest(method: "POST", url: url.absoluteString)
        for (name, value) in headers { request.setHeader(name, value) }
        request.setHeader("Content-Type", contentType)
        if let encoding { request.setHeader("Content-Encoding", encoding) }
        request.setHeader("Logbook-Attempt", String(attempt))
        switch await transport.send(request, body: .bytes(body), timeout: timeout) {
        case .success(let answer):
            return (.status(answer.status, retryAfter: answer.header("Retry-After")), Data(answer.body))
        case .failure(let failure) where failure.code == ETIMEDOUT:
            return (.timedOut, nil)
        case .failure(let failure):
            return (.transportError(failure.words), nil)
        }
    }

    /// `{"partialSuccess":{"rejectedLogRecords":"3","errorMessage":"..."}}` (int64 as a string, or
    /// a number from lenient servers).
    static func partialSuccess(_ answer: Data?) -> (rejected: Int64, message: String?) {
        guard let answer, !answer.isEmpty,
              let object = try? JSONSerialization.jsonObject(with: answer) as? [String: Any],
              let partial = (object["partialSuccess"] ?? object["partial_success"]) as? [String: Any]
        else { return (0, nil) }
        let raw = partial["rejectedLogRecords"] ?? partial["rejected_log_records"]
        let rejected = (raw as? String).flatMap(Int64.init) ?? (raw as? NSNumber)?.int64Value ?? 0
        let message = (partial["errorMessage"] ?? partial["error_message"]) as? String
        return (rejected, message?.isEmpty == false ? message : nil)
    }

    /// The message of an error answer: a google.rpc.Status's `message`, or the body's text (first 200 bytes).
    static func serverMessage(_ answer: Data?) -> String? {
        guard let answer, !answer.isEmpty else { return nil }
        if let object = try? JSONSerialization.jsonObject(with: answer) as? [String: Any] {
            return (object["message"] as? String).flatMap { $0.isEmpty ? nil : $0 }
        }
        let text = String(decoding: answer.prefix(200), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }
}
