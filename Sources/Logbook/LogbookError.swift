import CLogbook
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An operation of Logbook's C core failed. Carries what was attempted, on which path, the errno,
/// and, when the C core said more, what exactly was wrong (the option and its allowed range, the
/// file or directory and why).
public struct LogbookError: Error, CustomStringConvertible, Equatable, Sendable {
    /// The C function or operation that failed, e.g. `lb_bundle_open`.
    public let operation: String
    /// The bundle path involved, when there is one.
    public let path: String?
    /// The positive errno value.
    public let errno: Int32
    /// What was wrong, in a sentence (`lb_error_detail()`), e.g. "chunk size 1000 is not a power
    /// of two from 4096 to 16777216 bytes (4 KiB to 16 MiB)"; `nil` when the errno says it all.
    public let detail: String?

    public init(operation: String, path: String?, errno: Int32, detail: String? = nil) {
        self.operation = operation
        self.path = path
        self.errno = errno
        self.detail = detail.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The other process that holds the writer lock, for `EWOULDBLOCK` from `lb_bundle_open`.
    public var isLockedByAnotherWriter: Bool { errno == EWOULDBLOCK }

    /// The bundle was closed (or this process is a child forked while it was open) before the call.
    public var isClosed: Bool { errno == EBADF && Self.isBundleOperation(operation) }

    private static func isBundleOperation(_ operation: String) -> Bool {
        operation.hasPrefix("lb_bundle") || operation.hasPrefix("lb_logger") || operation.hasPrefix("lb_archive")
    }

    /// `operation 'path': what was wrong (errno N)`, escaped for a terminal (a path or a file name
    /// can hold control characters).
    public var description: String {
        let reason: String
        if let detail {
            reason = detail
        } else {
            switch errno {
            case EWOULDBLOCK where operation.hasPrefix("lb_bundle_open"):
                reason = "another process is writing to this bundle"
            case EBADF where Self.isBundleOperation(operation):
                reason = "the bundle is closed"
            case EPROTO where operation == "lb_reader_open":
                reason = "neither a Logbook bundle nor an archive directory or file"
            case EPROTO:
                reason = "not a Logbook bundle of format version \(LB_FORMAT_VERSION), or damaged"
            default:
                reason = String(cString: strerror(errno))
            }
        }
        return escapingControlCharacters("\(operation)\(path.map { " '\($0)'" } ?? ""): \(reason) (errno \(errno))")
    }
}

/// The one place where a C return code (0 or -errno) becomes a thrown error. `detailed`: the call
/// sets `lb_error_detail()` when it fails (the open calls), read here on the same thread.
@usableFromInline
package func check(_ result: Int32, _ operation: String, path: String? = nil, detailed: Bool = false) throws(LogbookError) {
    if result < 0 {
        let detail = detailed ? String(cString: lb_error_detail()) : nil
        throw LogbookError(operation: operation, path: path, errno: -result, detail: detail)
    }
}
