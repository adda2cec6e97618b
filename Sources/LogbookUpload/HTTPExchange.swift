import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logbook

/// One HTTP request and its answer, for the uploader and the exporters: a session of its own (a
/// fresh connection: on a reused connection that the server reset, libcurl retries the request by
/// itself and, unable to rewind a FoundationNetworking body, sends it with no body at all), no
/// redirect followed, and a cancellation that can never deadlock.
///
/// Why not `URLSession.upload(for:from:)`: its cancellation handler calls
/// `URLSessionTask.cancel()`, which waits on the session's queue, while the Swift runtime holds
/// the task's status lock; when the answer arrives at that moment, the session's queue resumes the
/// request's continuation, which needs that lock. Both wait for ever: `logbook export --follow`
/// hung on SIGTERM in 2 of 30 runs on a busy machine (stacks in docs/ARCHITECTURE.md). Here the
/// request is cancelled from another thread, once the handler has returned.
package enum HTTPExchange {
    /// Sends `request` with `body`; returns the answer's body and response, or throws a
    /// `URLError` (`.cancelled` when the calling task was cancelled).
    package static func send(_ request: URLRequest, body: Data, configuration: URLSessionConfiguration) async throws -> (Data, URLResponse) {
        let session = URLSession(configuration: configuration, delegate: RedirectRefusal(), delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let exchange = Cancellable()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, URLResponse), Error>) in
                let task = session.uploadTask(with: request, from: body) { data, response, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else if let response {
                        continuation.resume(returning: (data ?? Data(), response))
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                exchange.start(task)
            }
        } onCancel: {
            exchange.cancel()
        }
    }

    /// The URLSessionTask of one exchange, cancelled off the cancelling thread (also when the
    /// cancellation comes before the task exists: it is then cancelled as it starts).
    private final class Cancellable: Sendable {
        private let state = Locked<(task: URLSessionTask?, cancelled: Bool)>((nil, false))

        func start(_ task: URLSessionTask) {
            let cancelled = state.withLock { state -> Bool in
                state.task = task
                return state.cancelled
            }
            task.resume()
            if cancelled { DispatchQueue.global().async { task.cancel() } }
        }

        func cancel() {
            let task = state.withLock { state -> URLSessionTask? in
                state.cancelled = true
                return state.task
            }
            if let task { DispatchQueue.global().async { task.cancel() } }
        }
    }
}
