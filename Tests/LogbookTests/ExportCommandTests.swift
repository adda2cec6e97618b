import Foundation
import XCTest
import Logbook
import LogbookExport

/// `logbook export` as a user runs it, where an adversarial review found it wanting: a signal
/// while a batch is retried, a long `--interval`, relative source paths, two exporters on one
/// cursor, records overwritten before they could be read.
final class ExportCommandTests: XCTestCase {


    /// SIGTERM while a batch waits between attempts (the collector answered 503 with
    /// Retry-After: 30) ends the command at once, with the batch not acknowledged: the next run
    /// sends it, counted as repeated. Retries are reported as they happen.
    func testSIGTERMWhileRetryingEndsAtOnceAndSkipsNothing() throws {
        try requireOTLPDefinitions()
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let source = try makeBundle(dir, records: 30)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        for (follow, path) in [(false, "/s/ok,503ra30/v1/logs"), (true, "/s/ok,503ra30/follow/v1/logs")] {
            let url = server.url(path).absoluteString
            let arguments = ["export", "--otlp", url, "--cursors", dir + "/cursors", "--batch", "10"] + (follow ? ["--follow"] : []) + [source]
            let output = Pipe()
            let process = try launch(logbook, arguments, output: output)
            usleep(2_500_000)
            let signalled = Date()
            process.terminate()
            process.waitUntilExit()
            XCTAssertLessThan(Date().timeIntervalSince(signalled), 2, "ended at once (follow: \(follow))")
            let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            XCTAssertTrue(said.contains("attempt 1 failed (HTTP 503 (Retry-After: 30)); trying again in"), said)
            XCTAssertTrue(said.contains("exported 10 records"), "the interrupted pass's first batch counts: \(said)")
            let run = try runProgram(logbook, arguments.filter { $0 != "--follow" })
            XCTAssertTrue(run.output.contains("exported 20 records, 10 sent again after a restart"), run.output)
        }
    }

    /// A signal during a long `--interval` ends the wait at once; an interval that is not a
    /// number of seconds a wait can take is refused.
    func testIntervalsAreCheckedAndASignalEndsTheWait() throws {
        try requireOTLPDefinitions()
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let source = try makeBundle(dir, records: 5)
        for bad in ["inf", "nan", "1e300", "0", "0.001", "-1", "86401"] {
            let run = try runProgram(logbook, ["export", "--otlp", "http://127.0.0.1:1/v1/logs", "--follow", "--interval", bad, source])
            XCTAssertNotEqual(run.status, 0, bad)
            XCTAssertTrue(run.output.contains("--interval"), run.output)
        }
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        let process = try launch(logbook, ["export", "--otlp", server.url("/v1/logs").absoluteString, "--cursors", dir + "/cursors",
                                          "--follow", "--interval", "3600", source])
        usleep(1_500_000)
        let signalled = Date()
        process.terminate()
        process.waitUntilExit()
        XCTAssertLessThan(Date().timeIntervalSince(signalled), 1)
        XCTAssertEqual(process.terminationStatus, 0)
    }

    /// The cursor's name comes from the source's canonical path: a relative spelling resumes the
    /// absolute one's cursor, and two bundles both called `app.logbook` in two directories do not
    /// share one. A second exporter of the same destination and source is refused while the
    /// first runs.
    func testCursorsFollowTheCanonicalPathAndAreTakenByOneExporter() throws {
        try requireOTLPDefinitions()
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        try FileManager.default.createDirectory(atPath: dir + "/a", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/b", withIntermediateDirectories: true)
        _ = try makeBundle(dir + "/a", records: 20)
        _ = try makeBundle(dir + "/b", records: 30)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        let url = server.url("/v1/logs").absoluteString
        func export(_ path: String, in directory: String) throws -> String {
            try runProgram("/bin/sh", ["-c", "cd '\(directory)' && '\(logbook)' export --otlp '\(url)' --cursors '\(dir)/cursors' \(path)"]).output
        }
        XCTAssertTrue(try export(dir + "/a/app.logbook", in: dir).contains("exported 20 records"))
        XCTAssertTrue(try export("app.logbook", in: dir + "/a").contains("exported 0 records"), "a relative spelling resumes")
        XCTAssertTrue(try export("./app.logbook/", in: dir + "/a").contains("exported 0 records"))
        XCTAssertTrue(try export("app.logbook", in: dir + "/b").contains("exported 30 records"), "another bundle, its own cursor")
        XCTAssertTrue(try export("app.logbook", in: dir + "/a").contains("exported 0 records"))

        let slow = try launch(logbook, ["export", "--otlp", server.url("/slow/200/v1/logs").absoluteString, "--cursors", dir + "/cursors2",
                                       "--batch", "1", dir + "/b/app.logbook"])
        usleep(1_000_000)
        let second = try runProgram(logbook, ["export", "--otlp", server.url("/slow/200/v1/logs").absoluteString, "--cursors", dir + "/cursors2",
                                              dir + "/b/app.logbook"])
        XCTAssertNotEqual(second.status, 0)
        XCTAssertTrue(second.output.contains("another exporter uses this cursor"), second.output)
        slow.terminate()
        slow.waitUntilExit()
    }

    /// Records an overwrite ring destroyed before the exporter could read them are reported,
    /// not skipped in silence.
    func testRecordsOverwrittenBeforeTheyCouldBeReadAreReported() throws {
        try requireOTLPDefinitions()
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        let bundle = try LogBundle(path: dir + "/ring.logbook", capacity: 16 << 10, chunkSize: 4096, wrapPolicy: .overwrite)
        let log = try bundle.logger("app")
        let output = Pipe()
        let process = try launch(logbook, ["export", "--otlp", server.url("/v1/logs").absoluteString, "--cursors", dir + "/cursors",
                                          "--follow", "--interval", "0.2", dir + "/ring.logbook"], output: output)
        usleep(500_000)
        for i in 0..<5000 { log.info("record \(i) \(String(repeating: "x", count: 100))") }
        try bundle.flush()
        usleep(1_000_000)
        process.terminate()
        process.waitUntilExit()
        try bundle.close()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(said.contains("overwritten in the ring before they could be read"), said)
        XCTAssertTrue(said.contains("overwritten before they could be read"), said)
        // a first export of the closed ring: the bundle's own counts say what was overwritten
        let once = try runProgram(logbook, ["export", "--otlp", server.url("/v1/logs").absoluteString, "--cursors", dir + "/fresh",
                                            dir + "/ring.logbook"])
        XCTAssertTrue(once.output.contains("the reader reports: overwritten"), once.output)
    }

    /// Archive files deleted before an export are reported by the first pass, not skipped in
    /// silence.
    func testMissingArchiveFilesAreReported() throws {
        try requireOTLPDefinitions()
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        let bundle = try LogBundle(path: dir + "/app.logbook", capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000, archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil))
        let log = try bundle.logger("app")
        for i in 0..<3000 { log.info("record \(i) \(String(repeating: "y", count: 100))") }
        try bundle.close()
        let files = try FileManager.default.contentsOfDirectory(atPath: dir + "/app.logbook/archive").filter { $0.hasSuffix(".lba.zst") }.sorted()
        XCTAssertGreaterThan(files.count, 3)
        try FileManager.default.removeItem(atPath: dir + "/app.logbook/archive/" + files[1])
        let run = try runProgram(logbook, ["export", "--otlp", server.url("/v1/logs").absoluteString, "--cursors", dir + "/cursors",
                                           dir + "/app.logbook"])
        XCTAssertTrue(run.output.contains("the reader reports: missing"), run.output)
    }

    /// The cursor's disk is full: the export stops with ENOSPC before it sends a batch it could
    /// not record, and once there is room again every record goes, each once.
    func testAFullCursorDiskStopsTheExportAndLosesNothing() throws {
        try requireOTLPDefinitions()
        let logbook = try XCTUnwrap(logbookExecutable(), "swift build first")
        let dir = makeTemporaryDirectory(self)
        let source = try makeBundle(dir, records: 300)
        let mountPoint = dir + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mount = try runProgram("/bin/mount", ["-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", mountPoint])
        guard mount.status == 0 else { throw XCTSkip("cannot mount a tmpfs here (needs root): \(mount.output)") }
        defer { _ = try? runProgram("/bin/umount", [mountPoint]) }
        let cursors = mountPoint + "/cursors"
        try FileManager.default.createDirectory(atPath: cursors, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let server = try UploadServer(directory: dir, script: "otlp_server.py")
        let arguments = ["export", "--otlp", server.url("/v1/logs").absoluteString, "--cursors", cursors, "--batch", "100", source]
        // fill the disk (the cursor's lock file, empty, still fits: it needs no block)
        let filler = try runProgram("/bin/sh", ["-c", "cat /dev/zero > '\(mountPoint)/filler' 2>/dev/null; true"])
        XCTAssertEqual(filler.status, 0)
        let full = try runProgram(logbook, arguments)
        XCTAssertNotEqual(full.status, 0, full.output)
        XCTAssertTrue(full.output.contains("No space left on device"), full.output)
        func bodies() -> [String] {
            server.requests().filter { ($0["answer"] as? String) == "ok" }
                .flatMap { ($0["records"] as? [[String: Any]]) ?? [] }.compactMap { $0["body"] as? String }
        }
        XCTAssertEqual(bodies().count, 0, "nothing sent that the cursor could not record")
        try FileManager.default.removeItem(atPath: mountPoint + "/filler")
        let again = try runProgram(logbook, arguments)
        XCTAssertEqual(again.status, 0, again.output)
        XCTAssertEqual(bodies().sorted(), (0..<300).map { "record \($0)" }.sorted(), "every record once")
    }
}
