import Foundation
import Logbook

/// SIGTERM and SIGINT for the commands that end cleanly on them (`export --follow`, `upload`) or
/// at once (`show --follow`, `query --follow`): a handler of our own writes the signal's number to
/// a pipe, whichever thread it lands on, and one thread reads the pipe and calls the command's
/// `arrived`.
///
/// A Dispatch signal source (with SIG_IGN, as on Darwin) lost one SIGTERM in 20 on a busy machine
/// and `export --follow` waited out its interval: on Linux it needs the signal blocked in every
/// thread, and Foundation's threads do not inherit a blocked mask.
///
/// The handler replaces whatever the command inherited: a signal ignored by its parent (a shell
/// runs a background job, `cmd &`, with SIGINT ignored; `trap '' TERM` before `exec` ignores
/// SIGTERM) would otherwise leave it deaf to that signal: `logbook upload` waited for a
/// Retry-After of an hour through SIGTERMs, and `show --follow` of a script's `&` went on after
/// SIGINT. Both are unblocked in the calling thread too, in case
/// the parent spawned it with them blocked (a Dispatch worker thread blocks nearly every signal).
enum TerminationSignals {
    static let handled = [SIGTERM, SIGINT]

    static func take(_ arrived: @escaping @Sendable (Int32) -> Void) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { fail("cannot make a pipe for signals: \(String(cString: strerror(errno)))") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(ends[1], F_SETFL, O_NONBLOCK)  // the handler never blocks
        terminationSignalPipe = ends[1]
        var action = sigaction()
        action.__sigaction_handler.sa_handler = terminationSignalArrived
        action.sa_flags = SA_RESTART
        sigemptyset(&action.sa_mask)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        for signalNumber in handled {
            sigaction(signalNumber, &action, nil)
            sigaddset(&unblocked, signalNumber)
        }
        pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
        let readEnd = ends[0]
        Thread.detachNewThread {
            var byte: UInt8 = 0
            while true {
                guard retryingInterrupts({ read(readEnd, &byte, 1) }) == 1 else { return }
                arrived(Int32(byte))
            }
        }
    }

    /// For a command with nothing to save (`show --follow`, `query --follow`): it ends by the
    /// signal as soon as one arrives, as the signal's default action would, also when its parent
    /// ignored it. Nothing is flushed: a main thread blocked writing to a full pipe (a paused
    /// pager) holds stdout, and the default action never waited for it either.
    static func endOnArrival() {
        take { signalNumber in endBy(signalNumber, flushing: false) }
    }

    /// Ends the process by `signalNumber` itself, its default action restored: for a command that
    /// stopped cleanly on it, so that its parent (a shell, a service manager) sees how it ended.
    static func endBy(_ signalNumber: Int32, flushing: Bool = true) -> Never {
        if flushing { fflush(nil) }  // what `say` printed: the signal's default action would drop it
        signal(signalNumber, SIG_DFL)
        var only = sigset_t()
        sigemptyset(&only)
        sigaddset(&only, signalNumber)
        pthread_sigmask(SIG_UNBLOCK, &only, nil)
        raise(signalNumber)
        exit(128 + signalNumber)  // not reached
    }

    /// "SIGTERM", "SIGINT".
    static func name(_ signalNumber: Int32) -> String { signalNumber == SIGINT ? "SIGINT" : signalNumber == SIGTERM ? "SIGTERM" : "signal \(signalNumber)" }
}

/// The write end of the pipe `terminationSignalArrived` writes to (set before the handler is
/// installed; -1 until then).
nonisolated(unsafe) private var terminationSignalPipe: Int32 = -1

/// SIGTERM's and SIGINT's handler: async-signal-safe, it only writes one byte, the signal's
/// number (and keeps errno).
private func terminationSignalArrived(_ signalNumber: Int32) {
    let saved = errno
    var byte = UInt8(truncatingIfNeeded: signalNumber)
    _ = write(terminationSignalPipe, &byte, 1)
    errno = saved
}
