import CLogbook
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An operation of Logbook's C core failed. Carries what was attempted, on which path, and the errno.
public struct LogbookError: Error, CustomStringConvertible, Equatable, Sendable {
    /// The C function or operation that failed, e.g. `lb_bundle_open`.
    public let operation: String
    /// The bundle path involved, when there is one.
    public let path: String?
    /// The positive errno value.
    public let errno: Int32

    public init(operation: String, path: String?, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    /// The other process that holds the writer lock, for `EWOULDBLOCK` from `lb_bundle_open`.
    public var isLockedByAnotherWriter: Bool { errno == EWOULDBLOCK }

    public var description: String {
        let reason: String
        switch errno {
        case EWOULDBLOCK where operation == "lb_bundle_open":
            reason = "another process is writing to this bundle"
        case EPROTO where operation == "lb_reader_open":
            reason = "neither a Logbook bundle nor an archive directory or file"
        case EPROTO:
            reason = "not a Logbook bundle of format version \(LB_FORMAT_VERSION), or damaged"
        default:
            reason = String(cString: strerror(errno))
        }
        return "\(operation)\(path.map { " '\($0)'" } ?? ""): \(reason) (errno \(errno))"
    }
}

/// The one place where a C return code (0 or -errno) becomes a thrown error.
@usableFromInline
func check(_ result: Int32, _ operation: String, path: String? = nil) throws(LogbookError) {
    if result < 0 { throw LogbookError(operation: operation, path: path, errno: -result) }
}
