#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex: the lock of Logbook's Swift layer (never on the logging path),
/// also used by LogbookTesting (hence `package`).
///
/// Not `Synchronization.Mutex`: on Linux that one waits on a raw futex, which ThreadSanitizer does
/// not see, so every access it orders is reported as a race and real races drown in the noise
/// (a two-thread dictionary update under `Mutex` gives reports; under this lock none). CI runs the
/// concurrency tests under ThreadSanitizer, so Logbook's own locks must be ones it understands.
package final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
