import CLogbookTestSupport
import Foundation
import XCTest
@testable import Logbook

/// A fresh directory under the system temporary directory, removed when the test ends.
func makeTemporaryDirectory(_ test: XCTestCase) -> String {
    let path = NSTemporaryDirectory() + "logbook-test-" + UUID().uuidString
    try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    test.addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
    return path
}

/// Reads everything a bundle holds with a fresh reader.
func readBundle(_ path: String) throws -> (entries: [LogEntry], issues: [LogIssue]) {
    let reader = try LogReader(path: path)
    let entries = try reader.readAll()
    return (entries, reader.issues)
}

/// The repository root, found from this file's path.
let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

/// The `logbook` executable that `swift test` builds next to the test bundle.
func logbookExecutable() -> String? { builtExecutable("logbook") }

/// An executable of this package that `swift build --build-tests` builds next to the test bundle.
func builtExecutable(_ name: String) -> String? {
    let binDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    let path = binDirectory.appendingPathComponent(name).path
    return FileManager.default.isExecutableFile(atPath: path) ? path : nil
}

/// Runs a program, returning its exit status and combined output.
@discardableResult
func runProgram(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// A small deterministic PRNG (SplitMix64) so that corruption tests are reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A forked child (`lb_test_spawn`) that logs shaped records and reports every record it committed
/// over a pipe ({u32 thread, u32 kind, u64 sequence} each), until the test kills it with SIGKILL.
/// The reports are read while it runs. The pipe's capacity (4 KiB, 256 reports) bounds how far the
/// child runs ahead of what was read: a kill after `waitForReports(atLeast: n)` lands within
/// n + 256 + threads records, on any machine.
final class ReportingChild {
    let pid: pid_t
    let threads: Int
    private let readEnd: Int32
    private let flags: Int32
    private var bytes = [UInt8]()
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)

    /// Forks a child logging into `path`. With a `chunkBudget`, its threads stop once the bundle
    /// claimed that many chunks since the child opened it (bounding what a cycle writes by bytes,
    /// not by time) and wait to be killed.
    init(path: String, threads: Int, firstSequence: UInt64, chunkSize: UInt32, capacity: UInt64,
         policy: lb_wrap_policy = LB_WRAP_OVERWRITE, archiveFileSize: UInt64 = 0, chunkBudget: UInt64 = 0) {
        var fds: [Int32] = [0, 0]
        precondition(lb_test_report_pipe(&fds) == 0)
        self.threads = threads
        pid = path.withCString { cPath in
            var child = lb_test_child(
                bundle_path: cPath, report_fd: fds[1], threads: Int32(threads), first_sequence: firstSequence,
                chunk_size: chunkSize, capacity: capacity, wrap_policy: policy.rawValue,
                archive_file_size: archiveFileSize, chunk_budget: chunkBudget)
            return lb_test_spawn(&child)
        }
        close(fds[1])
        readEnd = fds[0]
        flags = fcntl(readEnd, F_GETFL)
        _ = fcntl(readEnd, F_SETFL, flags | O_NONBLOCK)
    }

    var reportedAnything: Bool { committedCount > 0 }

    /// Reads what the pipe holds; false once the child closed it (it ended).
    @discardableResult
    private func drain() -> Bool {
        while true {
            let n = read(readEnd, &buffer, buffer.count)
            if n == 0 { return false }
            if n < 0 { return true }
            bytes += buffer[0..<n]
        }
    }

    private var allReports: [(thread: UInt32, kind: UInt32, sequence: UInt64)] {
        stride(from: 0, to: bytes.count - 15, by: 16).map { offset in
            let thread = bytes[offset..<offset + 4].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            let kind = bytes[offset + 4..<offset + 8].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            let sequence = bytes[offset + 8..<offset + 16].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            return (thread, kind, sequence)
        }
    }

    private var stoppedCount = 0, committedCount = 0
    private var counted = 0  // bytes already counted into stoppedCount and committedCount

    private func count() {
        while counted + 16 <= bytes.count {
            let kind = bytes[counted + 4..<counted + 8].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            if kind == UInt32(LB_TEST_REPORT_STOPPED) { stoppedCount += 1 } else { committedCount += 1 }
            counted += 16
        }
    }

    /// Every thread spent the chunk budget and waits to be killed.
    var stopped: Bool { stoppedCount == threads }

    /// Reads reports until at least `count` records were reported or every thread stopped. The
    /// deadline (120 s) is a failsafe against a child that hangs, not part of any verdict: returns
    /// false when it passed.
    @discardableResult
    func waitForReports(atLeast count: Int) -> Bool {
        let failsafe = DispatchTime.now().uptimeNanoseconds + 120_000_000_000
        while true {
            let open = drain()
            self.count()
            if committedCount >= count || stopped { return true }
            if !open || DispatchTime.now().uptimeNanoseconds > failsafe { return false }
            usleep(200)
        }
    }

    /// Lets the child go on for `nanoseconds`, reading its reports (only for where a kill lands,
    /// never for how much the child writes: bound that with a chunk budget).
    func run(forNanoseconds nanoseconds: UInt64) {
        let until = DispatchTime.now().uptimeNanoseconds + nanoseconds
        while DispatchTime.now().uptimeNanoseconds < until {
            drain()
            usleep(500)
        }
    }

    /// SIGKILLs the child, reaps it and reads the last reports. Returns the wait status.
    func kill() -> Int32 {
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        _ = fcntl(readEnd, F_SETFL, flags)
        drain()
        close(readEnd)
        count()
        return status
    }

    /// Every reported committed record, as thread << 48 | sequence.
    var reports: [UInt64] {
        allReports.filter { $0.kind == UInt32(LB_TEST_REPORT_COMMITTED) }.map { UInt64($0.thread) << 48 | $0.sequence }
    }

    /// Where the next child's sequences should start: past every reported one, with a margin for
    /// records committed just before the kill but never reported (their numbers must not repeat).
    func nextFirstSequence(after first: UInt64) -> UInt64 {
        (reports.map { $0 & 0xFFFF_FFFF_FFFF }.max() ?? first) + 1000
    }
}

/// A child process whose standard output and error are collected while it runs.
final class ChildProcess: @unchecked Sendable {
    let process = Process()
    private let stdout = Locked(Data())
    private let stderr = Locked(Data())
    private let done = DispatchGroup()

    init(_ executable: String, _ arguments: [String]) throws {
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

    var output: String { stdout.withLock { String(decoding: $0, as: UTF8.self) } }
    var errors: String { stderr.withLock { String(decoding: $0, as: UTF8.self) } }

    /// Waits until standard output has this line. The timeout is a failsafe against a hang:
    /// throws when it passed, or when the child exited first.
    func waitForLine(_ line: String, timeout: TimeInterval = 120) throws {
        try waitFor("the line '\(line)'", timeout: timeout) { output.split(separator: "\n").contains(Substring(line)) }
    }

    /// Waits until standard error contains `text` (the CLI's progress and warnings go there,
    /// unbuffered): a test waits for what it needs the child to have done, instead of sleeping.
    func waitForErrors(containing text: String, timeout: TimeInterval = 120) throws {
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
    func waitForExit(timeout: TimeInterval = 120) throws -> Int32 {
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
    func stacks() -> String {
        let gdb = "/usr/bin/gdb"
        guard process.isRunning, FileManager.default.isExecutableFile(atPath: gdb),
              let run = try? runProgram(gdb, ["-p", "\(process.processIdentifier)", "-batch", "-ex", "thread apply all bt 20"])
        else { return "" }
        let frames = run.output.split(separator: "\n").filter { $0.hasPrefix("Thread ") || $0.hasPrefix("#") }
        return "stacks:\n" + frames.prefix(200).joined(separator: "\n")
    }

    func killIfRunning() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// What a test helper throws when what it waited for never came (XCTest fails the test with it).
struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` every 5 ms until it holds; false if it still does not after `seconds`. The
/// deadline is a failsafe against a hang, never a verdict about speed: give it minutes, and assert
/// the result.
func waitUntil(seconds: Double = 120, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while try !condition() {
        if Date() > deadline { return false }
        usleep(5_000)
    }
    return true
}

/// `waitUntil` for async tests: sleeps with `Task.sleep`, so the tasks it waits for can run on the
/// cooperative pool meanwhile (a name of its own: with the same name, a synchronous condition
/// picked the blocking overload).
func eventually(seconds: Double = 120, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while try await !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return true
}

/// The shaped records of the integrity tests (Tests/CLogbookTestSupport/shaped_records.c): each
/// record's size and bytes follow from (thread, sequence), so an altered or mixed-up record is
/// caught value by value.
enum ShapedRecord {
    static let template = "thread {} seq {} text {}"

    /// The (thread, sequence) of an entry that is exactly a shaped record, or nil.
    static func identify(_ entry: LogEntry, chunkSize: Int) -> (thread: UInt32, sequence: UInt64)? {
        guard entry.level == .info, entry.error == nil, entry.arguments.count == 3,
              case .unsigned(let thread, .uint32) = entry.arguments[0],
              case .unsigned(let sequence, .uint64) = entry.arguments[1],
              case .string(let text, isStatic: false) = entry.arguments[2]
        else { return nil }
        var shape = lb_test_shape()
        lb_test_record_shape(UInt32(thread), sequence, UInt32(chunkSize), &shape)
        guard text.utf8.elementsEqual(expectedText(UInt32(thread), sequence, Int(shape.text_length))) else { return nil }
        if shape.metadata != 0 {
            let expected = LogMetadata([
                .init(key: "k", value: .value(.signed(shape.metadata_number, .int64))),
                .init(key: "t", value: .value(.string(
                    String(decoding: expectedText(UInt32(thread), sequence, Int(shape.metadata_text_length)), as: UTF8.self),
                    isStatic: false))),
            ])
            guard entry.metadata == expected else { return nil }
        } else if !entry.metadata.isEmpty {
            return nil
        }
        return (UInt32(thread), sequence)
    }

    static func expectedText(_ thread: UInt32, _ sequence: UInt64, _ length: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            buffer.withMemoryRebound(to: CChar.self) { _ = lb_test_shape_text(thread, sequence, UInt32(length), $0.baseAddress) }
            count = length
        }
    }
}

/// Skips the test unless python3 imports opentelemetry-proto and protobuf: the OTLP tests parse
/// every body with the official definitions (scripts/install-deps installs them).
func requireOTLPDefinitions() throws {
    let has = try runProgram("/usr/bin/env", ["python3", "-c", "import opentelemetry.proto, google.protobuf"])
    guard has.status == 0 else { throw XCTSkip("python3 lacks opentelemetry-proto and protobuf (pip install them)") }
}

/// Starts `executable` in the background, its output discarded or sent to `output`.
func launch(_ executable: String, _ arguments: [String], output: Pipe? = nil) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = output ?? FileHandle.nullDevice
    process.standardError = output ?? FileHandle.nullDevice
    try process.run()
    return process
}

/// A closed bundle `DIR/app.logbook` holding `records` records "record 0" … of logger "app".
@discardableResult
func makeBundle(_ directory: String, records: Int) throws -> String {
    let bundle = try LogBundle(path: directory + "/app.logbook")
    let log = try bundle.logger("app")
    for i in 0..<records { log.info("record \(i)") }
    try bundle.close()
    return directory + "/app.logbook"
}
