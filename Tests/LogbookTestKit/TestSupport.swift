import Foundation
import XCTest
import Logbook

/// A fresh directory under the system temporary directory, removed when the test ends.
package func makeTemporaryDirectory(_ test: XCTestCase) -> String {
    let path = NSTemporaryDirectory() + "logbook-test-" + UUID().uuidString
    try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    test.addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
    return path
}

/// Reads everything a bundle holds with a fresh reader.
package func readBundle(_ path: String) throws -> (entries: [LogEntry], issues: [LogIssue]) {
    let reader = try LogReader(path: path)
    let entries = try reader.readAll()
    return (entries, reader.issues)
}

/// The repository root, found from this file's path.
package let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

/// The `logbook` executable that `swift test` builds next to the test bundle.
package func logbookExecutable() -> String? { builtExecutable("logbook") }

/// An executable of this package that `swift build --build-tests` builds next to the test bundle.
package func builtExecutable(_ name: String) -> String? {
    let binDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    let path = binDirectory.appendingPathComponent(name).path
    return FileManager.default.isExecutableFile(atPath: path) ? path : nil
}

/// Runs a program, returning its exit status and combined output.
@discardableResult
package func runProgram(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (status: Int32, output: String) {
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
package struct SplitMix64: RandomNumberGenerator {
    package var state: UInt64
    package init(state: UInt64) { self.state = state }
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What a test helper throws when what it waited for never came (XCTest fails the test with it).
package struct TestFailure: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Polls `condition` every 5 ms until it holds; false if it still does not after `seconds`. The
/// deadline is a failsafe against a hang, never a verdict about speed: give it minutes, and assert
/// the result.
package func waitUntil(seconds: Double = 120, _ condition: () throws -> Bool) rethrows -> Bool {
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
package func eventually(seconds: Double = 120, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while try await !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return true
}

/// Stops process `pid` (SIGSTOP) and returns once every one of its threads is stopped (false if
/// that never came: `waitUntil`'s failsafe). What the test does until it sends SIGCONT then
/// happens while the process does nothing, on any machine: a follower is lapped by a writer
/// however fast it reads.
package func stopProcess(_ pid: pid_t) -> Bool {
    guard kill(pid, SIGSTOP) == 0 else { return false }
    return waitUntil {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return !tasks.isEmpty && tasks.allSatisfy { task in
            // "TID (NAME) STATE ...": the name may hold spaces and parentheses, the state follows the last ')'.
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
        }
    }
}

/// Skips the test unless python3 imports opentelemetry-proto and protobuf: the OTLP tests parse
/// every body with the official definitions (scripts/install-deps installs them).
package func requireOTLPDefinitions() throws {
    let has = try runProgram("/usr/bin/env", ["python3", "-c", "import opentelemetry.proto, google.protobuf"])
    guard has.status == 0 else { throw XCTSkip("python3 lacks opentelemetry-proto and protobuf (pip install them)") }
}

/// Starts `executable` in the background, its output discarded or sent to `output`.
package func launch(_ executable: String, _ arguments: [String], output: Pipe? = nil) throws -> Process {
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
package func makeBundle(_ directory: String, records: Int) throws -> String {
    let bundle = try LogBundle(path: directory + "/app.logbook")
    let log = try bundle.logger("app")
    for i in 0..<records { log.info("record \(i)") }
    try bundle.close()
    return directory + "/app.logbook"
}

extension LogReader {
    package static func issueCount(_ path: String) -> Int {
        guard let reader = try? LogReader(path: path) else { return -1 }
        _ = try? reader.readAll()
        return reader.issues.count
    }
}
