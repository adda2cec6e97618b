import Foundation
import LogbookTestKit
import Synchronization
import XCTest
import Logbook

#if canImport(Glibc)
import Glibc
#endif

/// The one syscall layer (`retryingInterrupts`, `systemCall`) and the typed `LogbookError`: what
/// happened is decided from the subject and the errno, never from the operation's name.
final class SystemCallTests: XCTestCase {
    // MARK: the error's subject

    /// Regression: `isClosed` was `operation.hasPrefix("lb_bundle")` and `EBADF`, so any error
    /// named like a bundle call (a test's, a user's) said "the bundle is closed".
    func testAnErrorNamedLikeABundleCallIsNotClosedUnlessItsSubjectIsTheBundle() {
        for subject: LogbookError.Subject in [.other, .reader, .cache, .spool, .uploader, .exportCursor, .file] {
            let error = LogbookError(subject: subject, operation: "lb_bundle_flush", path: "/tmp/a.logbook", errno: EBADF)
            XCTAssertFalse(error.isClosed, "\(subject)")
            XCTAssertFalse(error.description.contains("the bundle is closed"), error.description)
        }
        let unspecified = LogbookError(operation: "lb_bundle_flush", path: nil, errno: EBADF)
        XCTAssertEqual(unspecified.subject, .other, "the public initializer's default")
        XCTAssertFalse(unspecified.isClosed)
        for subject: LogbookError.Subject in [.bundle, .archiver] {
            let error = LogbookError(subject: subject, operation: "any name at all", path: nil, errno: EBADF)
            XCTAssertTrue(error.isClosed, "\(subject)")
            XCTAssertTrue(error.description.contains(": the bundle is closed (errno"), error.description)
        }
        XCTAssertFalse(LogbookError(subject: .bundle, operation: "lb_bundle_flush", path: nil, errno: EIO).isClosed)
    }

    /// Regression: `isLockedByAnotherWriter` was any `EWOULDBLOCK` (`EAGAIN`), also a file's
    /// non-blocking read; the description's "another process is writing" needed an operation named
    /// `lb_bundle_open…`.
    func testOnlyWhatTakesALockIsLockedByAnotherWriter() {
        for subject: LogbookError.Subject in [.bundle, .cache, .spool, .exportCursor] {
            XCTAssertTrue(LogbookError(subject: subject, operation: "open", path: nil, errno: EWOULDBLOCK).isLockedByAnotherWriter, "\(subject)")
        }
        for subject: LogbookError.Subject in [.archiver, .reader, .uploader, .file, .other] {
            XCTAssertFalse(LogbookError(subject: subject, operation: "lb_bundle_open", path: nil, errno: EWOULDBLOCK).isLockedByAnotherWriter,
                           "\(subject)")
        }
        let bundle = LogbookError(subject: .bundle, operation: "anything", path: "/tmp/b", errno: EWOULDBLOCK)
        XCTAssertTrue(bundle.description.contains("another process is writing to this bundle"), bundle.description)
        let file = LogbookError(subject: .file, operation: "lb_bundle_open", path: "/tmp/b", errno: EWOULDBLOCK)
        XCTAssertFalse(file.description.contains("another process is writing"), file.description)
    }

    /// The subject is part of the value: two errors that differ only in it are not equal.
    func testTheSubjectIsPartOfEquality() {
        let bundle = LogbookError(subject: .bundle, operation: "x", path: nil, errno: EIO)
        XCTAssertEqual(bundle, LogbookError(subject: .bundle, operation: "x", path: nil, errno: EIO))
        XCTAssertNotEqual(bundle, LogbookError(subject: .reader, operation: "x", path: nil, errno: EIO))
    }

    /// A closed bundle's calls still say so, each with its subject: the bundle's own calls, and
    /// the archiver's (which `LogbookService` tells apart from "no archiver", `ENOTSUP`).
    func testAClosedBundlesCallsAreClosedThroughTheirSubject() throws {
        let directory = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: directory + "/closed.logbook", capacity: 1 << 20, chunkSize: 16 << 10,
                                   archive: ArchiveOptions())
        try bundle.close()
        XCTAssertThrowsError(try bundle.flush()) { error in
            let error = error as! LogbookError
            XCTAssertEqual(error.subject, .bundle)
            XCTAssertTrue(error.isClosed, "\(error)")
        }
        XCTAssertThrowsError(try bundle.syncArchive()) { error in
            let error = error as! LogbookError
            XCTAssertEqual(error.subject, .archiver)
            XCTAssertTrue(error.isClosed, "\(error)")
        }
        let unarchived = try LogBundle(path: directory + "/plain.logbook", capacity: 1 << 20, chunkSize: 16 << 10)
        defer { try? unarchived.close() }
        XCTAssertThrowsError(try unarchived.syncArchive()) { error in
            let error = error as! LogbookError
            XCTAssertEqual(error.subject, .archiver)
            XCTAssertEqual(error.errno, ENOTSUP)
            XCTAssertFalse(error.isClosed)
        }
    }

    /// Errors of the other modules carry their subject: a reader's, and the file a caller named.
    func testReadersAndFilesNameTheirSubject() throws {
        let directory = makeTemporaryDirectory(self)
        XCTAssertThrowsError(try LogReader(path: directory + "/missing.logbook")) { error in
            XCTAssertEqual((error as! LogbookError).subject, .reader)
            XCTAssertEqual((error as! LogbookError).errno, ENOENT)
        }
        XCTAssertThrowsError(try systemCall(.file, "open", path: directory + "/missing") { open(directory + "/missing", O_RDONLY) }) {
            error in
            let error = error as! LogbookError
            XCTAssertEqual(error, LogbookError(subject: .file, operation: "open", path: directory + "/missing", errno: ENOENT))
        }
    }

    // MARK: retrying EINTR

    /// A call that fails with `EINTR` three times, then succeeds, is made four times and its
    /// result returned, by both the throwing and the non-throwing form.
    func testAnInterruptedCallIsRetriedUntilItIsNotInterrupted() throws {
        var calls = 0
        let interruptedThrice: () -> Int = {
            calls += 1
            if calls <= 3 {
                errno = EINTR
                return -1
            }
            return 42
        }
        XCTAssertEqual(retryingInterrupts(interruptedThrice), 42)
        XCTAssertEqual(calls, 4)
        calls = 0
        XCTAssertEqual(try systemCall(.file, "read", path: nil, interruptedThrice), 42)
        XCTAssertEqual(calls, 4)
    }

    /// Any other failure is not retried: the non-throwing form returns -1 with errno intact, the
    /// throwing form throws it with the subject, the operation and the path; an ignored errno
    /// returns -1 instead.
    func testOtherFailuresAreNotRetried() {
        var calls = 0
        let wouldBlock: () -> Int32 = {
            calls += 1
            errno = EAGAIN
            return -1
        }
        let result = retryingInterrupts(wouldBlock)
        let failure = errno
        XCTAssertEqual(result, -1)
        XCTAssertEqual(failure, EAGAIN)
        XCTAssertEqual(calls, 1)
        calls = 0
        XCTAssertThrowsError(try systemCall(.spool, "recv", path: "/spool", wouldBlock)) { error in
            XCTAssertEqual(error as? LogbookError, LogbookError(subject: .spool, operation: "recv", path: "/spool", errno: EAGAIN))
        }
        XCTAssertEqual(calls, 1)
        XCTAssertEqual(try systemCall(.spool, "recv", path: nil, ignoring: EAGAIN, wouldBlock), -1)
    }

    /// A real signal, delivered without `SA_RESTART` to a thread blocked in `read` on a pipe,
    /// interrupts the read (`EINTR`); `retryingInterrupts` reads again and returns the byte that
    /// arrives later. The signal is sent until the read was seen to be made a second time (a
    /// signal that lands before the thread blocks interrupts nothing): bounded by a count, with no
    /// sleep.
    func testASignalDuringABlockingReadIsRetried() throws {
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        defer { close(ends[0]); close(ends[1]) }
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        action.sa_flags = 0  // no SA_RESTART: the kernel returns EINTR from the read
        sigemptyset(&action.sa_mask)
        var previous = sigaction()
        XCTAssertEqual(sigaction(SIGURG, &action, &previous), 0)
        defer { sigaction(SIGURG, &previous, nil) }

        let reads = Atomic<Int>(0)
        let readerThread = Atomic<UInt>(0)
        let result = Atomic<Int>(0)
        let finished = DispatchSemaphore(value: 0)
        let readEnd = ends[0]
        Thread.detachNewThread {
            readerThread.store(UInt(pthread_self()), ordering: .releasing)
            var byte: UInt8 = 0
            let n = retryingInterrupts {
                reads.add(1, ordering: .relaxed)
                return read(readEnd, &byte, 1)
            }
            result.store(n == 1 ? Int(byte) : -1, ordering: .relaxed)
            finished.signal()
        }
        var thread: UInt = 0
        for _ in 0..<10_000_000 where thread == 0 {
            thread = readerThread.load(ordering: .acquiring)
            if thread == 0 { sched_yield() }
        }
        XCTAssertNotEqual(thread, 0, "the reader thread started")
        var signals = 0
        while reads.load(ordering: .relaxed) < 2 && signals < 1_000_000 {
            XCTAssertEqual(pthread_kill(pthread_t(thread), SIGURG), 0)
            signals += 1
            sched_yield()
        }
        XCTAssertGreaterThanOrEqual(reads.load(ordering: .relaxed), 2, "an interrupted read is made again (\(signals) signals)")
        var byte: UInt8 = 7
        XCTAssertEqual(write(ends[1], &byte, 1), 1)
        finished.wait()
        XCTAssertEqual(result.load(ordering: .relaxed), 7, "the byte written after the interruptions")
    }
}
