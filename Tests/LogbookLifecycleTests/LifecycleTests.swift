import Foundation
import LogbookLifecycle
import LogbookTestKit
import ServiceLifecycle
import XCTest
@testable import Logbook

import Logging

/// Graceful shutdown through swift-service-lifecycle: `LogbookService` seals, syncs and closes the
/// bundle, so a server stopped with SIGTERM loses nothing. The child tests run
/// `LogbookServiceExample` (built by `swift build --build-tests` next to the test bundle) and read
/// what it left behind; the in-process tests drive a `ServiceGroup` without signals.
/// Those of its tests that CI also runs under ThreadSanitizer are in `LifecycleConcurrencyTests`.
final class LifecycleTests: XCTestCase {

    // MARK: - SIGTERM to a child

    /// The child logs numbered requests of different sizes at 2000/s into a lossless bundle whose
    /// archive rolls every 64 KiB; SIGTERM once it logged 1,200 (about 130 KiB); it exits 0 and the
    /// archive files alone hold every record it wrote, once, complete and verified.
    func testSIGTERMLosesNoRecord() throws {
        let run = try runChild(drain: 300, before: { bundle in
            XCTAssertTrue(try waitUntil { try LogReader(path: bundle).info().counters.records >= 1200 }, "the child logged too little")
        })
        XCTAssertGreaterThanOrEqual(run.requests, 1200)
        try checkEverythingArchived(run)
    }

    /// SIGTERM as soon as the first batch is logged: the shutdown path while the archiver has
    /// barely started (no file rolled yet) still completes a file holding everything.
    func testSIGTERMRightAfterReadyLosesNoRecord() throws {
        let run = try runChild(drain: 50, before: { _ in })
        XCTAssertGreaterThan(run.requests, 0)
        try checkEverythingArchived(run, expectRolledFiles: false)
    }

    /// The request service logs 5000 records while it shuts down, after SIGTERM. LogbookService is
    /// first in the group, so it is shut down after the request service returned: all are kept.
    func testRecordsLoggedDuringAnotherServicesShutdownAreKeptWhenLogbookServiceIsFirst() throws {
        let run = try runChild(drain: 5000, before: { _ in usleep(300_000) })
        XCTAssertEqual(run.drained, 5000)
        try checkEverythingArchived(run)
    }

    /// The counterpart that shows the order matters (and that the test above can fail): with
    /// LogbookService last, it is shut down first, and what the request service logs afterwards
    /// is dropped and counted as `closed`, never written.
    func testLogbookServiceLastDropsWhatOtherServicesLogWhileShuttingDown() throws {
        let run = try runChild(drain: 500, logbookLast: true, before: { _ in usleep(300_000) })
        XCTAssertEqual(run.drained, 500)
        XCTAssertGreaterThanOrEqual(run.closedDrops, 500, "every drained record came after close: \(run.output)")
        XCTAssertEqual(run.recordsCounted + run.closedDrops, UInt64(run.requests + run.drained), run.output)
        let entries = try LogReader(path: run.archive).readAll()
        XCTAssertEqual(UInt64(entries.count), run.recordsCounted, "the archive holds what was counted, nothing more")
        XCTAssertFalse(entries.contains { $0.message.hasPrefix("drained ") }, "no drained record was written")
        // Counted by the bundle (what the child printed); its files have only those dropped while
        // close ran: once closed, it writes nothing to them.
        let info = try LogReader(path: run.bundle).info()
        XCTAssertLessThan(info.counters.drops[.closed] ?? 0, run.closedDrops)
    }

    // MARK: - In process

    /// Without an archiver there is nothing to sync (`ENOTSUP` is not an error): the ring is
    /// sealed and closed, and a reader finds every record in it.
    func testABundleWithoutArchiverIsClosedWithoutError() async throws {
        let directory = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: directory + "/ring.logbook")
        let worker = Worker(log: try bundle.logger("worker"), drain: 100)
        let group = ServiceGroup(services: [LogbookService(bundle: bundle), worker], logger: quietLogger())
        let running = Task { try await group.run() }
        while worker.written.withLock({ $0 }) < 500 { try await Task.sleep(for: .milliseconds(5)) }
        await group.triggerGracefulShutdown()
        try await running.value
        let written = worker.written.withLock { $0 }
        let reader = try LogReader(path: directory + "/ring.logbook")
        XCTAssertEqual(try reader.readAll().count, written)
        let summary = try reader.verify()
        XCTAssertTrue(summary.accounted && summary.recordsLost == 0 && summary.recordsDropped == 0, "\(summary)")
    }

    /// A bundle its owner closed before shutdown is left alone: no error from `run()`.
    func testABundleAlreadyClosedIsNotAnError() async throws {
        let bundle = try LogBundle(path: makeTemporaryDirectory(self) + "/app.logbook", archive: ArchiveOptions())
        try bundle.close()
        let running = Task { try await LogbookService(bundle: bundle).run() }
        running.cancel()
        try await running.value
    }

    /// The archive directory on a full 1 MiB tmpfs: the shutdown's sync fails with `ENOSPC`;
    /// `run()` throws it, so the group reports it, and the bundle is closed anyway.
    func testAnArchiverErrorIsThrownAndTheBundleIsClosedAnyway() async throws {
        let directory = makeTemporaryDirectory(self)
        let mountPoint = directory + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mount = try runProgram("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint])
        guard mount.status == 0 else { throw XCTSkip("cannot mount a tmpfs here (needs root): \(mount.output)") }
        addTeardownBlock { _ = try? runProgram("/bin/umount", [mountPoint]) }

        let bundle = try LogBundle(path: directory + "/app.logbook", capacity: 4 << 20, chunkSize: 16 << 10,
                                   archive: ArchiveOptions(directory: mountPoint + "/archive", maxFileSize: 4 << 20,
                                                           maxFiles: nil, quota: nil, compressionLevel: nil))
        let log = try bundle.logger("app")
        // A tmpfs root is writable by every user (mode 1777), which the archiver refuses: a directory
        // in it. Fill the file system but for 32 KiB, then log about 2 MiB.
        let filler = open(mountPoint + "/filler", O_WRONLY | O_CREAT, 0o600)
        var room = statvfs()
        statvfs(mountPoint, &room)
        let block = [UInt8](repeating: 0, count: 4096)
        var left = Int(room.f_bavail) * Int(room.f_frsize) - (32 << 10)
        while left > 0, write(filler, block, min(left, block.count)) > 0 { left -= block.count }
        close(filler)
        let padding = String(repeating: "p", count: 100)
        for index in 0..<20_000 { log.info("record \(index) \(padding)") }

        let running = Task { try await LogbookService(bundle: bundle, archiveSyncTimeout: .seconds(10)).run() }
        running.cancel()
        do {
            try await running.value
            XCTFail("run() returned although the archive disk is full")
        } catch let error as LogbookError {
            XCTAssertEqual(error.errno, ENOSPC, "\(error)")
        }
        XCTAssertThrowsError(try bundle.flush()) { XCTAssertTrue(($0 as! LogbookError).isClosed, "\($0)") }
    }

    // MARK: - Helpers

    /// What a child run left: its paths, what it said it logged, the bundle's counters it printed.
    struct ChildRun {
        var bundle: String
        var archive: String
        var requests: Int
        var drained: Int
        var recordsCounted: UInt64
        var droppedCounted: UInt64
        var closedDrops: UInt64
        var output: String
    }

    /// Starts the example, waits for "ready", runs `before` (given the bundle's path), sends
    /// SIGTERM, and waits for exit 0. The child's lossless writer waits up to 60 s for its archiver
    /// (not the example's 1 s), so that a slow disk delays the test instead of dropping records.
    func runChild(drain: Int, logbookLast: Bool = false, before: (String) throws -> Void) throws -> ChildRun {
        let executable = try XCTUnwrap(builtExecutable("LogbookServiceExample"), "swift build --build-tests builds LogbookServiceExample")
        let directory = makeTemporaryDirectory(self)
        let bundle = directory + "/server.logbook"
        let archive = directory + "/archive"
        try FileManager.default.createDirectory(atPath: archive, withIntermediateDirectories: true)
        var arguments = [bundle, "--archive", archive, "--rate", "2000", "--drain", String(drain), "--file-size", "65536",
                         "--lossless-wait", "60000"]
        if logbookLast { arguments.append("--logbook-last") }
        let child = try ChildProcess(executable, arguments)
        defer { child.killIfRunning() }
        try child.waitForLine("ready")
        try before(bundle)
        XCTAssertEqual(kill(child.process.processIdentifier, SIGTERM), 0)
        let status = try child.waitForExit()
        let output = child.output
        XCTAssertEqual(status, 0, "exit status; output:\n\(output)\nerrors:\n\(child.errors)")
        func value(_ prefix: String) throws -> String {
            let line = try XCTUnwrap(output.split(separator: "\n").first { $0.hasPrefix(prefix) }, "no '\(prefix)' in:\n\(output)")
            return String(line.dropFirst(prefix.count))
        }
        let finalLine = try XCTUnwrap(output.split(separator: "\n").last { $0.hasPrefix("closed ") || $0.hasPrefix("open ") },
                                      "no final line in:\n\(output)")
        XCTAssertTrue(finalLine.hasPrefix("closed "), "LogbookService closed the bundle: \(finalLine)")
        let counters = finalLine.split(separator: " ").dropFirst().reduce(into: [String: UInt64]()) { result, pair in
            let parts = pair.split(separator: "=")
            result[String(parts[0])] = UInt64(parts[1])
        }
        return ChildRun(bundle: bundle, archive: archive,
                        requests: try XCTUnwrap(Int(value("requests "))), drained: try XCTUnwrap(Int(value("drained "))),
                        recordsCounted: try XCTUnwrap(counters["records"]), droppedCounted: try XCTUnwrap(counters["dropped"]),
                        closedDrops: try XCTUnwrap(counters["closed"]), output: output)
    }

    /// The archive directory alone holds request 0..<requests and drained 0..<drained, each once,
    /// with their exact text; its files are complete; the bundle's counters show no drop and
    /// verify accounts for every record.
    func checkEverythingArchived(_ run: ChildRun, expectRolledFiles: Bool = true,
                                 file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(run.droppedCounted, 0, "the child's counters: \(run.output)", file: file, line: line)
        XCTAssertEqual(run.recordsCounted, UInt64(run.requests + run.drained), run.output, file: file, line: line)

        let archiveReader = try LogReader(path: run.archive)
        var requests = [Int](), drained = [Int]()
        for entry in try archiveReader.readAll() {
            let words = entry.message.split(separator: " ")
            let number = try XCTUnwrap(Int(words[1]), entry.message, file: file, line: line)
            switch words[0] {
            case "request":
                requests.append(number)
                let client = "client-" + String(repeating: "x", count: number % 41)
                XCTAssertEqual(entry.message, "request \(number) from \(client) took \(Double(number % 977) / 10) ms",
                               file: file, line: line)
            case "drained":
                drained.append(number)
                XCTAssertEqual(entry.message, "drained \(number) of \(run.drained) \(String(repeating: "d", count: number % 23))",
                               file: file, line: line)
            default:
                XCTFail("unexpected record \(entry.message)", file: file, line: line)
            }
        }
        XCTAssertEqual(requests.count, run.requests, "request records in the archive", file: file, line: line)
        XCTAssertEqual(requests.sorted(), Array(0..<run.requests), "every request once, the last included",
                       file: file, line: line)
        XCTAssertEqual(drained.sorted(), Array(0..<run.drained), "every drained record once", file: file, line: line)
        XCTAssertEqual(archiveReader.issues.map(\.description), [], file: file, line: line)
        let files = try archiveReader.archiveFiles()
        XCTAssertEqual(files.writingFiles, 0, "the file being written was completed", file: file, line: line)
        XCTAssertEqual(files.unsyncedFiles, 0, file: file, line: line)
        if expectRolledFiles { XCTAssertGreaterThan(files.files, 1, "rolled every 64 KiB", file: file, line: line) }

        // The bundle and its archive together, checked against the bundle's own counters.
        let bundleReader = try LogReader(path: run.bundle)
        XCTAssertEqual(try bundleReader.readAll().count, run.requests + run.drained, file: file, line: line)
        let summary = try bundleReader.verify()
        XCTAssertTrue(summary.accounted, "\(summary)", file: file, line: line)
        XCTAssertFalse(summary.writerAlive, file: file, line: line)
        XCTAssertEqual(summary.recordsLost, 0, "\(summary)", file: file, line: line)
        XCTAssertEqual(summary.recordsDropped, 0, "\(summary)", file: file, line: line)
        XCTAssertEqual(bundleReader.issues.filter(\.isFailure).map(\.description), [], file: file, line: line)
        let info = try bundleReader.info()
        XCTAssertEqual(info.counters.dropped, 0, "\(info.counters.drops)", file: file, line: line)
        XCTAssertEqual(info.archive.lagChunks, 0, "every chunk archived", file: file, line: line)
    }

}
