import CLogbookUpload
import Foundation
import Logbook

/// A request of the uploader or an exporter: its method, URL and headers. The body is the item's
/// content (or the exporter's batch); its framing (`Content-Length`) is the transport's.
public struct DeliveryRequest: Sendable {
    public var method: String
    /// An `http://` or `https://` URL. Redirects are never followed: a 3xx is the answer.
    public var url: String
    /// Header lines in order (`Name`, `value`).
    public var headers: [(name: String, value: String)]

    public init(method: String = "PUT", url: String, headers: [(name: String, value: String)] = []) {
        self.method = method
        self.url = url
        self.headers = headers
    }

    /// Sets `name` to `value` (replacing every line of that name, compared without case), or
    /// removes it when `value` is nil.
    public mutating func setHeader(_ name: String, _ value: String?) {
        headers.removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
        if let value { headers.append((name, value)) }
    }

    /// The first value of `name`, compared without case.
    public func header(_ name: String) -> String? { headerValue(name, in: headers) }
}

/// The first value of header `name` in `headers`, compared without case (HTTP field names are).
package func headerValue(_ name: String, in headers: [(name: String, value: String)]) -> String? {
    headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
}

/// An answer: its status, header lines and (the start of) its body.
package struct HTTPAnswer: Sendable {
    package var status: Int
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]

    package func header(_ name: String) -> String? { headerValue(name, in: headers) }

    /// "Name: value\r\n" lines, as the C layer hands them over.
    package static func parseHeaders(_ text: UnsafeBufferPointer<UInt8>) -> [(name: String, value: String)] {
        let text = String(decoding: text, as: UTF8.self)
        return text.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" || $0 == "\r" }).compactMap { (line: Substring) in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[line.startIndex..<colon], value = line[colon...].dropFirst()
            return (String(name).trimmingCharacters(in: .whitespaces), String(value).trimmingCharacters(in: .whitespaces))
        }
    }
}

/// Why an exchange got no answer.
package struct HTTPFailure: Error, Sendable {
    /// `ETIMEDOUT`, `ECONNREFUSED`, `ECONNRESET`, `EHOSTUNREACH`, `ECANCELED`, `EPROTO`, `EINVAL`,
    /// `ENOMEM`, `EMSGSIZE` (an answer's head over 100 KiB: not read); `EBADMSG` (the content
    /// failed its check) or `EIO` (it could not be read whole): the body's own.
    package var code: Int32
    package var words: String
    /// With `EMSGSIZE`: the status of the head that was too large (104 for an interim answer), 0
    /// when its status line was not read.
    package var refusedHeadStatus = 0

    /// Whether the body is at fault (not the network): the item must not be retried as it is.
    package var isContentProblem: Bool { code == EBADMSG || code == EIO }
}

/// A body: none, bytes in memory, or a file read as it is sent (with the check of its content
/// against its key, logbook_content_check.h).
package enum HTTPBody: @unchecked Sendable {
    case none
    case bytes([UInt8])
    /// `fd` stays open until the exchange ends. Bytes `offset..<contentLength` are sent; the bytes
    /// before `offset` are read and checked only (a resumed upload).
    case file(fd: Int32, offset: UInt64, contentLength: UInt64, check: ContentCheck)
}

/// What a file body must be.
package enum ContentCheck: Sendable {
    case size
    case sha256([UInt8])
    /// The archive header the key was read from: 64 bytes (`.lba`) or the 72-byte header frame of a
    /// `.lba.zst`.
    case archive([UInt8])
}

/// Body bytes sent by the exchange in flight, readable from any thread (a progress line).
package final class TransferProgress: Sendable {
    private let state = Locked<(exchange: OpaquePointer?, settled: UInt64)>((nil, 0))

    package init() {}

    package var bytesSent: UInt64 {
        state.withLock { state in state.exchange.map { lb_http_exchange_bytes_sent($0) } ?? state.settled }
    }

    fileprivate func attach(_ exchange: OpaquePointer) { state.withLock { $0.exchange = exchange } }

    fileprivate func detach() {
        state.withLock { state in
            if let exchange = state.exchange { state.settled = lb_http_exchange_bytes_sent(exchange) }
            state.exchange = nil
        }
    }
}

/// The one HTTP layer of the uploader and the exporters (C: logbook_http.h, over libcurl): keep-alive
/// connections pooled per transport, each exchange run on a thread of its own (a blocking transfer
/// never holds one of Swift's few cooperative threads; `ExchangeThreads` keeps a few idle ones for
/// the next exchanges), cancellation from any task at any moment, no redirect followed.
package final class HTTPTransport: Sendable {
    /// Idle connections (`lb_http_connection *`), reused by the next exchange.
    private let idle = Locked<[OpaquePointer]>([])
    private let keptIdle: Int

    package init(keptIdle: Int = 8) {
        self.keptIdle = keptIdle
    }

    deinit {
        for connection in idle.withLock({ $0 }) { lb_http_connection_close(connection) }
    }

    /// Sends `request` with `body`; the answer (any status), or why there is none. `timeout`: how
    /// long the body may go without a byte sent (connecting included), and how long after the
    /// request's end the whole answer may take (a server trickling it one byte at a time ends
    /// there, timed out). `responseLimit`: the bytes of the answer's body read, the rest not (the
    /// answer ends there). `onInterim` runs on the exchange's thread for each 1xx answer (its status
    /// and headers), before the final one. `freshConnection`: never an idle one (see `takeConnection`).
    package func send(_ request: DeliveryRequest, body: HTTPBody, timeout: Duration, responseLimit: Int = 64 << 10,
                      progress: TransferProgress? = nil, freshConnection: Bool = false,
                      onInterim: (@Sendable (Int, [(name: String, value: String)]) -> Void)? = nil) async -> Result<HTTPAnswer, HTTPFailure> {
        let milliseconds = UInt32(clamping: max(1, nanoseconds(timeout) / 1_000_000))
        let lines = request.headers.map { "\($0.name): \($0.value)" }
        var exchange: OpaquePointer?
        let created: Int32 = lines.withCStrings { headers in
            var spec = lb_http_request()
            spec.header_count = headers.count
            spec.connect_timeout_ms = milliseconds
            spec.stall_timeout_ms = milliseconds
            spec.response_body_limit = responseLimit
            spec.body_fd = -1
            return request.method.withCString { method in
                request.url.withCString { url in
                    spec.method = method
                    spec.url = url
                    return headers.withUnsafeBufferPointer { pointers in
                        spec.headers = pointers.baseAddress
                        return body.describe(spec) { lb_http_exchange_create(&$0, &exchange) }
                    }
                }
            }
        }
        guard created == 0, let exchange else {
            return .failure(HTTPFailure(code: -created, words: "the request cannot be made (\(String(cString: strerror(-created))))"))
        }
        defer { lb_http_exchange_free(exchange) }
        let interim = onInterim.map { InterimHandler($0) }
        if let interim {
            lb_http_exchange_set_interim_handler(exchange, { context, status, headers, length in
                let handler = Unmanaged<InterimHandler>.fromOpaque(context!).takeUnretainedValue()
                let fields = headers.map { HTTPAnswer.parseHeaders(UnsafeBufferPointer(start: UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self), count: length)) } ?? []
                handler.call(Int(status), fields)
            }, Unmanaged.passUnretained(interim).toOpaque())
        }
        progress?.attach(exchange)
        defer { progress?.detach() }
        let connection = takeConnection(fresh: freshConnection)
        guard let connection else { return .failure(HTTPFailure(code: ENOMEM, words: "no connection could be made ready")) }
        let box = ExchangePointer(exchange)
        let rc: Int32 = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
                ExchangeThreads.shared.perform(PerformWork(connection: connection, exchange: box, continuation: continuation))
            }
        } onCancel: {
            lb_http_exchange_cancel(box.pointer)
        }
        withExtendedLifetime(interim) {}
        if rc != 0 {
            lb_http_connection_close(connection)  // a connection that failed is never reused
            return .failure(HTTPFailure(code: -rc, words: String(cString: lb_http_exchange_error(exchange)),
                                        refusedHeadStatus: rc == -EMSGSIZE ? Int(lb_http_exchange_status(exchange)) : 0))
        }
        let status = Int(lb_http_exchange_status(exchange))
        // Kept alive after a success only: a retry goes out on a fresh connection, so that a
        // connection the server reset is never silently retried by libcurl as the same attempt.
        if (200..<300).contains(status) { putBack(connection) } else { lb_http_connection_close(connection) }
        var headerLength = 0, bodyLength = 0
        let headers = lb_http_exchange_headers(exchange, &headerLength)!
        let answerBody = lb_http_exchange_body(exchange, &bodyLength)!
        return .success(HTTPAnswer(
            status: status,
            headers: HTTPAnswer.parseHeaders(UnsafeBufferPointer(start: UnsafeRawPointer(headers).assumingMemoryBound(to: UInt8.self), count: headerLength)),
            body: Array(UnsafeRawBufferPointer(start: answerBody, count: bodyLength))))
    }

    /// An idle connection, or a new one. On a reused connection that the server closed before it
    /// answered, libcurl sends the request again by itself (rewinding the body): `fresh` is for a
    /// request that must not go twice (an append at an offset, which the first copy already moved).
    private func takeConnection(fresh: Bool) -> OpaquePointer? {
        if !fresh, let connection = idle.withLock({ $0.popLast() }) { return connection }
        var connection: OpaquePointer?
        return lb_http_connection_open(&connection) == 0 ? connection : nil
    }

    private func putBack(_ connection: OpaquePointer) {
        let kept = idle.withLock { idle in
            guard idle.count < keptIdle else { return false }
            idle.append(connection)
            return true
        }
        if !kept { lb_http_connection_close(connection) }
    }
}

private final class InterimHandler: Sendable {
    let call: @Sendable (Int, [(name: String, value: String)]) -> Void
    init(_ call: @escaping @Sendable (Int, [(name: String, value: String)]) -> Void) { self.call = call }
}

/// The exchange's pointer, handed to the cancellation handler (the C call is thread-safe; the
/// exchange is freed only after the thread performing it has resumed the task).
private struct ExchangePointer: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

/// The threads that perform exchanges: one per exchange under way, never shared, so a stalled
/// transfer delays no other. A thread that finished waits for the next exchange; up to `keptIdle`
/// wait at once, the others end. (Made per exchange, a thread cost about 8 system calls and
/// 50 µs: a fifth of an exporter's time at 4,000 requests per second.)
private final class ExchangeThreads: @unchecked Sendable {
    static let shared = ExchangeThreads()
    private let condition = NSCondition()
    private var queue: [PerformWork] = []
    /// Threads waiting for work; each one takes one queued exchange when it wakes.
    private var idle = 0
    private let keptIdle = 8

    func perform(_ work: PerformWork) {
        condition.lock()
        queue.append(work)
        let startsThread = queue.count > idle  // every waiting thread has an exchange already
        if !startsThread { condition.signal() }
        condition.unlock()
        if startsThread {
            let thread = Thread { [self] in serve() }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    private func serve() {
        while true {
            condition.lock()
            while queue.isEmpty {
                if idle >= keptIdle {
                    condition.unlock()
                    return
                }
                idle += 1
                condition.wait()
                idle -= 1
            }
            let work = queue.removeFirst()
            condition.unlock()
            work.run()
        }
    }
}

private final class PerformWork: @unchecked Sendable {
    let connection: OpaquePointer
    let exchange: ExchangePointer
    let continuation: CheckedContinuation<Int32, Never>

    init(connection: OpaquePointer, exchange: ExchangePointer, continuation: CheckedContinuation<Int32, Never>) {
        self.connection = connection
        self.exchange = exchange
        self.continuation = continuation
    }

    func run() { continuation.resume(returning: lb_http_exchange_perform(connection, exchange.pointer)) }
}

extension HTTPBody {
    /// Fills the body's part of `spec` for the duration of `body`.
    fileprivate func describe<R>(_ base: lb_http_request, _ body: (inout lb_http_request) -> R) -> R {
        var spec = base
        switch self {
        case .none:
            return body(&spec)
        case .bytes(let bytes):
            spec.content_length = UInt64(bytes.count)
            spec.body_length = UInt64(bytes.count)
            return bytes.withUnsafeBytes { buffer in
                // A non-nil pointer even for no bytes: a POST of an empty body still has one.
                spec.body_bytes = buffer.baseAddress.map { UnsafeRawPointer($0) } ?? UnsafeRawPointer(bitPattern: 1)
                return body(&spec)
            }
        case .file(let fd, let offset, let contentLength, let check):
            spec.body_fd = fd
            spec.body_offset = offset
            spec.body_length = contentLength - min(offset, contentLength)
            spec.content_length = contentLength
            switch check {
            case .size:
                spec.check = Int32(LB_CONTENT_CHECK_SIZE.rawValue)
                return body(&spec)
            case .sha256(let digest):
                spec.check = Int32(LB_CONTENT_CHECK_SHA256.rawValue)
                withUnsafeMutableBytes(of: &spec.sha256) { $0.copyBytes(from: digest.prefix(32)) }
                return body(&spec)
            case .archive(let header):
                spec.check = Int32(LB_CONTENT_CHECK_ARCHIVE.rawValue)
                return header.withUnsafeBytes { buffer in
                    spec.expected_prefix = buffer.baseAddress
                    spec.expected_prefix_length = buffer.count
                    return body(&spec)
                }
            }
        }
    }
}

extension Array where Element == String {
    /// The strings as C strings, alive for the duration of `body`.
    fileprivate func withCStrings<R>(_ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        let copies = map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        return body(copies.map { UnsafePointer($0) })
    }
}
