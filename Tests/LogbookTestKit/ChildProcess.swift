import Foundation
import Logbook
import XCTest

/// A child process whose standard output and error are collected while it runs.
package final class ChildProcess: @unchecked Sendable {
    package let process = Process()
    private let stdout = Locked(Data())
    private let stderr = Locked(Data())
    private let done = DispatchGroup()

    package init(_ executable: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        for (pipe, buffer) in [(out, stdout), (err, stderr)] {
            let handle = pipe.fileHandleForReading
            done.enter()
            Thread.detachNewThread { [done] in
                while true {
                    let data = handle.availableData
                    if data.isEmpty { break }
                    buffer.withLock { $0.append(data) }
                }
                done.leave()
            }
        }
    }

    package var output: String { stdout.withLock { String(decoding: $0, as: UTF8.self) } }
    package var errors: String { stderr.withLock { String(decoding: $0, as: UTF8.self) } }

    /// Waits until standard output has this line. The timeout is a failsafe against a hang:
    /// throws when it passed, or when the child exited first.
    package func waitForLine(_ line: String, timeout: TimeInterval = 120) throws {
        try waitFor("the line '\(line)'", timeout: timeout) { output.split(separator: "\n").contains(Substring(line)) }
    }

    /// Waits until standard error contains `text` (the CLI's progress and warnings go there,
    /// unbuffered): a test waits for what it needs the child to have done, instead of sleeping.
    package func waitForErrors(containing text: String, timeout: TimeInterval = 120) throws {
        try waitFor("'\(text)' on standard error", timeout: timeout) { errors.contains(text) }
    }

    private func waitFor(_ what: String, timeout: TimeInterval, _ condition: () -> Bool) throws {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while !condition() {
            guard process.isRunning else {
                throw TestFailure("exited (\(process.terminationStatus)) before \(what): \(output) \(errors)")
            }
            guard Date() < deadline else { throw TestFailure("no \(what) after \(timeout) s: \(output) \(errors)") }
            usleep(5_000)
        }
    }

    /// The exit status (a signal that ended it counts as 128 + the signal). The timeout is a
    /// failsafe: throws when it passed.
    package func waitForExit(timeout: TimeInterval = 120) throws -> Int32 {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while process.isRunning {
            guard Date() < deadline else {
                throw TestFailure("still running after \(timeout) s: \(output) \(errors)\n\(stacks())")
            }
            usleep(5_000)
        }
        _ = done.wait(timeout: .now() + 10)
        return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }

    /// The child's threads' stacks (gdb, when installed): what a hung child was doing, in the
    /// failure CI prints (how the SIGTERM hang of 'logbook export' was found).
    package func stacks() -> String {
        let gdb = "/usr/bin/gdb"
        guard process.isRunning, FileManager.default.isExecutableFile(atPath: gdb),
              let run = try? runProgram(gdb, ["-p", "\(process.processIdentifier)", "-batch", "-ex", "thread apply all bt 20"])
        else { return "" }
        let frames = run.output.split(separator: "\n").filter { $0.hasPrefix("Thread ") || $0.hasPrefix("#") }
        return "stacks:\n" + frames.prefix(200).joined(separator: "\n")
    }

    package func killIfRunning() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
