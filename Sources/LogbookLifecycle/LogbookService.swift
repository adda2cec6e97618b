import Dispatch
import Logbook
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Keeps a `LogBundle` open while a `ServiceGroup` runs, and seals, syncs and closes it
/// when the group shuts down, so that a server stopped with `SIGTERM` loses no record.
///
/// ```swift
/// let bundle = try LogBundle(path: "/var/log/app.logbook", archive: ArchiveOptions())
/// let server = MyServer(log: try bundle.logger("http"))
/// let group = ServiceGroup(
///     services: [LogbookService(bundle: bundle), server],  // LogbookService first: it stops last
///     gracefulShutdownSignals: [.sigterm, .sigint],
///     logger: logger
/// )
/// try await group.run()
/// ```
///
/// ## Put it first in the group
///
/// A `ServiceGroup` shuts its services down in reverse order: the last one in its list first, and
/// each only once the one after it has returned from `run()`. Put `LogbookService` **first** in
/// the list, so that it is shut down **last**: every other service can still log while it drains
/// its work and stops. A record logged after the bundle is closed is not written; it is dropped
/// and counted as `closed` in `LogBundle.counters` (`LogCounters.drops`).
///
/// ## What shutdown does
///
/// When graceful shutdown reaches it, ``run()``:
/// 1. seals every thread's open chunk (`LogBundle.flush()`), so readers see them whole;
/// 2. with an archiver, waits until everything sealed is archived and fsynced
///    (`LogBundle.syncArchive(timeout:)`, at most ``archiveSyncTimeout``);
/// 3. closes the bundle (`LogBundle.close()`): the archive file being written is completed
///    (END frame, fsync, rename, `ArchiveOptions.onFileRolled`; compressed first when
///    compression is on) and the writer lock is released.
///
/// A failed step does not stop the later ones: the bundle is always closed, and ``run()`` then
/// throws the first failure (a `LogbookError`, e.g. the archiver's `ENOSPC`), which the
/// `ServiceGroup` reports. The steps block (closing waits for the archiver and the compression of
/// the last file), so they run on a Dispatch thread, never on a thread of Swift's cooperative pool.
///
/// Cancellation closes the bundle in the same way: when the task running ``run()`` is cancelled
/// rather than shut down gracefully (a cancellation signal, a service that failed, the group's
/// `maximumGracefulShutdownDuration` elapsed), the bundle is sealed, synced and closed at once,
/// and ``run()`` returns. Services still logging at that moment lose what they log afterwards
/// (counted as `closed`). Outside a `ServiceGroup`, only cancellation ends ``run()``.
///
/// A bundle that is already closed when shutdown begins (closed by its owner) is left as it is,
/// without an error.
public struct LogbookService: Service {
    /// The bundle this service closes on shutdown.
    public let bundle: LogBundle
    /// How long shutdown waits for the archiver to persist and fsync what was logged before the
    /// bundle is closed. Closing itself still completes the file being written, however long the
    /// disk takes.
    public var archiveSyncTimeout: Duration

    /// A service that closes `bundle` on graceful shutdown or cancellation.
    /// - Parameters:
    ///   - bundle: the bundle the program's loggers write to.
    ///   - archiveSyncTimeout: the longest wait for the archiver before closing (see
    ///     ``archiveSyncTimeout``); without an archiver it is not used.
    public init(bundle: LogBundle, archiveSyncTimeout: Duration = .seconds(30)) {
        self.bundle = bundle
        self.archiveSyncTimeout = archiveSyncTimeout
    }

    /// Waits for graceful shutdown (or cancellation), then seals, syncs the archive and closes the
    /// bundle. Returns once the bundle is closed.
    /// - Throws: the first `LogbookError` of the shutdown steps; the bundle is closed
    ///   anyway. Never `CancellationError`: a cancelled service closes the bundle and returns.
    public func run() async throws(LogbookError) {
        // Returns on graceful shutdown, throws CancellationError on cancellation: either way, close.
        try? await gracefulShutdown()
        let bundle = self.bundle
        let timeout = archiveSyncTimeout
        if let failure = await onOwnThread({ Self.shutDown(bundle, archiveSyncTimeout: timeout) }) {
            throw failure
        }
    }

    /// Flush, sync, close: every step is tried, the first failure is returned. `isClosed` from any
    /// step means that someone else closed the bundle, which is what this was for.
    static func shutDown(_ bundle: LogBundle, archiveSyncTimeout: Duration) -> LogbookError? {
        var failure: LogbookError?
        func attempt(_ step: () throws(LogbookError) -> Void) -> Bool {
            do {
                try step()
            } catch {
                if error.isClosed { return false }
                // ENOTSUP: the bundle has no archiver, nothing to sync.
                if error.errno != ENOTSUP || error.subject != .archiver {
                    failure = failure ?? error
                }
            }
            return true
        }
        guard attempt({ () throws(LogbookError) in try bundle.flush() }) else { return nil }
        guard attempt({ () throws(LogbookError) in try bundle.syncArchive(timeout: archiveSyncTimeout) }) else {
            return failure
        }
        _ = attempt({ () throws(LogbookError) in try bundle.close() })
        return failure
    }
}

/// Runs `body` on a Dispatch thread and waits for it without blocking a thread of the cooperative
/// pool (closing waits for the archiver's disk; with two cores, a blocked pool thread is half of
/// it). Not cancellable: once started, closing always finishes.
private func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: body()) }
    }
}
