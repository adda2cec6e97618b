import CLogbook
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An operation of Logbook failed. Carries what failed (``subject``), what was attempted on it
/// (``operation``), on which path, the errno, and, when Logbook said more, what exactly was wrong
/// (the option and its allowed range, the file or directory and why).
///
/// What happened is decided from ``subject`` and ``errno`` only (``isClosed``,
/// ``isLockedByAnotherWriter`` and the reason ``description`` gives): ``operation`` is for people.
public struct LogbookError: Error, CustomStringConvertible, Equatable, Sendable {
    /// What failed: the kind of object the operation was on.
    public enum Subject: Sendable, Hashable {
        /// A ``LogBundle`` and its loggers: opening the bundle, registering a logger, flushing,
        /// syncing, closing (`lb_bundle_*`, `lb_logger_register`).
        case bundle
        /// The archiver of a ``LogBundle``: ``LogBundle/rollArchive()`` and
        /// ``LogBundle/syncArchive(timeout:)`` (`lb_archive_roll`, `lb_archive_sync`).
        case archiver
        /// A ``LogReader`` on a bundle, an archive directory or an archive file: opening,
        /// scanning, streaming, verifying, inspecting (`lb_reader_*`).
        case reader
        /// A message cache of LogbookCache (`MessageCache`, `CacheReader`) and its file
        /// (`lb_cache_*`).
        case cache
        /// An upload spool of LogbookUpload (`Spool`): its directory, lock, and the content and
        /// state files of its items.
        case spool
        /// An `Uploader` of LogbookUpload refusing what it was given: an identifier, a size over
        /// the quota, something that is no archive file or archive directory.
        case uploader
        /// The export cursors of LogbookExport (`ExportCursorStore`): their directory, snapshots,
        /// journals and locks.
        case exportCursor
        /// A file or directory that a caller named, used directly rather than through one of the
        /// objects above: a file submitted for upload, an archive directory whose files are
        /// submitted, a report the `logbook` command writes, a capture's temporary directory.
        case file
        /// Made outside Logbook (the default of ``LogbookError/init(subject:operation:path:errno:detail:)``):
        /// nothing is concluded from it.
        case other
    }

    /// What failed (see ``Subject``).
    public let subject: Subject
    /// What was attempted, for people: the C function or system call (`lb_bundle_open`,
    /// `pwrite`), or the Swift method that refused (`Uploader.submit`).
    public let operation: String
    /// The path involved, when there is one.
    public let path: String?
    /// The positive errno value.
    public let errno: Int32
    /// What was wrong, in a sentence (`lb_error_detail()`), e.g. "chunk size 1000 is not a power
    /// of two from 4096 to 16777216 bytes (4 KiB to 16 MiB)"; `nil` when the errno says it all.
    public let detail: String?

    /// `subject` defaults to ``Subject/other``: an error made outside Logbook is never taken for
    /// one of a closed or locked bundle, whatever its `operation` says.
    public init(subject: Subject = .other, operation: String, path: String?, errno: Int32, detail: String? = nil) {
        self.subject = subject
        self.operation = operation
        self.path = path
        self.errno = errno
        self.detail = detail.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Another process (or another owner in this one) holds the lock of what was opened:
    /// `EWOULDBLOCK` when opening a bundle for writing, a message cache, a spool, or taking an
    /// export cursor.
    public var isLockedByAnotherWriter: Bool {
        guard errno == EWOULDBLOCK else { return false }
        switch subject {
        case .bundle, .cache, .spool, .exportCursor: return true
        case .archiver, .reader, .uploader, .file, .other: return false
        }
    }

    /// The bundle was closed (or this process is a child forked while it was open) before the
    /// call: `EBADF` from the bundle, its loggers or its archiver.
    public var isClosed: Bool {
        guard errno == EBADF else { return false }
        switch subject {
        case .bundle, .archiver: return true
        case .reader, .cache, .spool, .uploader, .exportCursor, .file, .other: return false
        }
    }

    /// `operation 'path': what was wrong (errno N)`, escaped for a terminal (a path or a file name
    /// can hold control characters).
    public var description: String {
        let reason: String
        if let detail {
            reason = detail
        } else if isLockedByAnotherWriter && subject == .bundle {
            reason = "another process is writing to this bundle"
        } else if isClosed {
            reason = "the bundle is closed"
        } else if errno == EPROTO && subject == .bundle {
            reason = "not a Logbook bundle of format version \(LB_FORMAT_VERSION), or damaged"
        } else if errno == EPROTO && subject == .reader {
            reason = "neither a Logbook bundle of format version \(LB_FORMAT_VERSION) nor an archive directory or file, or damaged"
        } else {
            reason = String(cString: strerror(errno))
        }
        return escapingControlCharacters("\(operation)\(path.map { " '\($0)'" } ?? ""): \(reason) (errno \(errno))")
    }
}

/// The one place where a C return code (0 or -errno) of Logbook's C layers becomes a thrown error
/// (a system call's -1 and errno: ``systemCall(_:_:path:ignoring:_:)``). `detailed`: the call sets
/// `lb_error_detail()` when it fails (the open calls), read here on the same thread.
@usableFromInline
package func check(_ result: Int32, _ subject: LogbookError.Subject, _ operation: String, path: String? = nil,
                   detailed: Bool = false) throws(LogbookError) {
    if result < 0 {
        let detail = detailed ? String(cString: lb_error_detail()) : nil
        throw LogbookError(subject: subject, operation: operation, path: path, errno: -result, detail: detail)
    }
}
