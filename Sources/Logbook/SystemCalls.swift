#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The system calls of Logbook's Swift modules go through here: the one place that retries a call a
// signal interrupted (EINTR) and the one place that turns a system call's -1 and errno into a
// thrown ``LogbookError``. (The C layers' `-errno` returns go through `check`.) Not swift-system:
// CI installs no package for this.

/// Calls `call`, a system call that returns -1 and sets errno when it fails, again as long as it
/// fails with `EINTR`; returns its last result, errno intact for the caller to inspect (`EAGAIN`
/// from a non-blocking `recv`, `EPIPE` from a `write`). A partial read or write is a result: the
/// caller loops for the rest. Never for `close`: Linux releases the descriptor even when `close`
/// fails with `EINTR`, and a second `close` may close another thread's new descriptor.
@inlinable
package func retryingInterrupts<Value: FixedWidthInteger & SignedInteger>(_ call: () -> Value) -> Value {
    while true {
        let result = call()
        if result != -1 || errno != EINTR { return result }
    }
}

/// Calls `call`, a system call that returns -1 and sets errno when it fails, again as long as it
/// fails with `EINTR`, and returns its result; any other failure is thrown as a ``LogbookError`` of
/// `subject` naming `operation` (the system call) and `path`. A failure with the errno `ignoring`
/// (`ENOENT` for an `unlinkat` of what may be gone) is not thrown: -1 is returned.
@inlinable
@discardableResult
package func systemCall<Value: FixedWidthInteger & SignedInteger>(
    _ subject: LogbookError.Subject, _ operation: String, path: String?, ignoring ignored: Int32? = nil,
    _ call: () -> Value
) throws(LogbookError) -> Value {
    let result = retryingInterrupts(call)
    if result == -1 {
        let failure = errno
        if failure != ignored { throw LogbookError(subject: subject, operation: operation, path: path, errno: failure) }
    }
    return result
}
