import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

/// Builds the C test program and the C example with the system C compiler, against the C core's
/// sources, and runs them: the C API is exercised from C exactly as users call it.
final class CProgramTests: XCTestCase {
    var compiler: String!

    override func setUpWithError() throws {
        let candidates = ["/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("no C compiler at \(candidates): the C programs cannot be built here")
        }
        compiler = found
    }

    /// Builds `source` against the C libraries, made by the one C recipe (`CSources/Makefile`) with
    /// the same flags: the writer and the reader always, the archiver's (linking liburing) when
    /// `archiver` is set, the cache's with `cache`, and the shaped records of the integrity tests
    /// with `testSupport`. Every C program is built with UBSan and `-fno-sanitize-recover` (unless
    /// `extraFlags` picks its sanitizers): any undefined behaviour ends the program with an error,
    /// so the test fails. An entry of `extraFlags` that is not a flag is a source of the program.
    func build(_ source: String, extraFlags: [String] = [], archiver: Bool = false, testSupport: Bool = false,
               cache: Bool = false, output: String) throws {
        let sanitizers = extraFlags.contains { $0.hasPrefix("-fsanitize") } ? [] : try undefinedBehaviourFlags()
        var compileFlags: [String] = ["-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"]
        compileFlags += sanitizers
        compileFlags += extraFlags.filter { $0.hasPrefix("-") }
        let libraries = makeTemporaryDirectory(self) + "/c-libraries"
        var wanted = ["liblogbook-read.a", "liblogbook.a"]  // each before the libraries it uses
        if archiver { wanted.insert("liblogbook-archive.a", at: 0) }
        if cache { wanted.insert("liblogbook-cache.a", at: 0) }
        let targets: [String] = wanted.map { libraries + "/" + $0 }
        var makeArguments: [String] = ["-s", "-C", repositoryRoot + "/CSources", "O=" + libraries, "CC=" + compiler]
        makeArguments.append("CFLAGS=" + compileFlags.joined(separator: " "))
        let made = try runProgram("/usr/bin/make", makeArguments + targets)
        XCTAssertEqual(made.status, 0, "make -C CSources failed:\n\(made.output)")
        var flags = compileFlags + ["-pthread", "-I", repositoryRoot + "/CSources/CLogbook/include"]
        var files = [repositoryRoot + "/" + source] + extraFlags.filter { !$0.hasPrefix("-") }
        if testSupport {
            flags += ["-I", repositoryRoot + "/Tests/CLogbookTestSupport/include"]
            files += [repositoryRoot + "/Tests/CLogbookTestSupport/shaped_records.c"]
        }
        if cache { flags += ["-I", repositoryRoot + "/CSources/CLogbookCache/include", "-I", repositoryRoot + "/Tests/CTests"] }
        if archiver { flags += ["-I", repositoryRoot + "/CSources/CLogbookArchive/include"] }
        var link: [String] = targets
        if archiver { link.append("-luring") }
        link += ["-lzstd", "-o", output]
        let result = try runProgram(compiler, flags + files + link)
        XCTAssertEqual(result.status, 0, "compiling \(source) failed:\n\(result.output)")
    }

    /// Builds and runs a C test program that prints "N passed, N failed".
    @discardableResult
    func runCTest(_ source: String, extraFlags: [String] = [], archiver: Bool = false, testSupport: Bool = false,
                  cache: Bool = false, environment: [String: String] = [:]) throws -> String {
        let binary = makeTemporaryDirectory(self) + "/c-test"
        try build(source, extraFlags: extraFlags, archiver: archiver, testSupport: testSupport, cache: cache,
                  output: binary)
        let result = try runProgram(binary, [], environment: environment.isEmpty ? nil : environment)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains(" passed, 0 failed"), result.output)
        XCTAssertFalse(result.output.contains("runtime error"), "a sanitizer report: \(result.output)")
        return result.output
    }

    /// UBSan that stops at the first report, or nothing where the compiler lacks it (said once).
    func undefinedBehaviourFlags() throws -> [String] {
        try Self.undefinedBehaviourProbe.get(compiler: compiler)
    }

    static let undefinedBehaviourProbe = SanitizerProbe(["-fsanitize=undefined", "-fno-sanitize-recover=all"])

    /// The flags of an ASan/UBSan build, or a skip when the C compiler cannot build with them.
    func sanitizerFlags() throws -> [String] {
        let dir = makeTemporaryDirectory(self)
        let flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
        try "int main(void) { return 0; }\n".write(toFile: dir + "/probe.c", atomically: true, encoding: .utf8)
        let probe = try runProgram(compiler, flags + [dir + "/probe.c", "-o", dir + "/probe"])
        if probe.status != 0 {
            throw XCTSkip("the C compiler cannot build with sanitizers here: \(probe.output.prefix(200))")
        }
        return flags
    }

    func testCCoreTestProgramPasses() throws { try runCTest("Tests/CTests/core_test.c") }

    /// The message cache's C API from C, under ASan and UBSan: order, overwrite and reject,
    /// limits, threads (power durability too), resize, header damage, truncation, 300 rounds of
    /// random bit flips, a 200-cycle SIGKILL loop, a hard link planted as the cache refused.
    func testCacheProgramIsCleanUnderAddressAndUndefinedSanitizers() throws {
        try runCTest("Tests/CTests/cache_test.c", extraFlags: try sanitizerFlags(), cache: true,
                     environment: ["ASAN_OPTIONS": "detect_leaks=1"])
    }

    /// Hostile paths (directories of others or writable by all, planted symlinks, FIFOs and hard
    /// links, the archive's `.writing` file too), the archive directory held to the same rules,
    /// errors that name what was wrong, a closed bundle that says so, and a forked child that
    /// closes the inherited bundle without hanging.
    func testSafetyProgramPasses() throws {
        let output = try runCTest("Tests/CTests/safety_test.c", archiver: true)
        if output.contains("skipped:") { print(output.split(separator: "\n").filter { $0.contains("skipped:") }.joined(separator: "\n")) }
    }

    /// A live follower of a lossless bundle whose archive files roll every few dozen chunks sees
    /// every record exactly once, with its values (Tests/CTests/follow_test.c): it lost hundreds
    /// of records without an issue when a directory listing missed a file being renamed, and a
    /// few when an archive file held a large record's end before its beginning (issue 42).
    func testALiveFollowerOfARollingLosslessArchiveSeesEveryRecordOnce() throws {
        try runCTest("Tests/CTests/follow_test.c", archiver: true)
    }

    /// What verify answers (Tests/CTests/verify_test.c): the number of failing issues it returns,
    /// counters no bundle can reach (a lying durable copy, 2^63 overwritten), a kill inside a
    /// chunk claim made by hand, a bundle whose creation was cut short, the archive directory of a
    /// bundle that archived nothing, a record whose beginning was overwritten said overwritten.
    func testVerifyProgramPasses() throws {
        try runCTest("Tests/CTests/verify_test.c", archiver: true)
    }

    func testSafetyProgramIsCleanUnderAddressAndUndefinedSanitizers() throws {
        let flags = try sanitizerFlags()
        try runCTest("Tests/CTests/safety_test.c", extraFlags: flags, archiver: true,
                     environment: ["ASAN_OPTIONS": "detect_leaks=1"])
    }

    /// The CRC-32C fast path (three SSE4.2 streams joined by shift tables) against the table
    /// reference, for every alignment and lengths around each block boundary.
    func testCrc32cFastPathMatchesTheReference() throws { try runCTest("Tests/CTests/crc_test.c") }

    func testCCoreTestProgramIsCleanUnderAddressAndUndefinedSanitizers() throws {
        let flags = try sanitizerFlags()
        let binary = makeTemporaryDirectory(self) + "/core-test-asan"
        try build("Tests/CTests/core_test.c", extraFlags: flags, output: binary)
        let result = try runProgram(binary, [], environment: ["ASAN_OPTIONS": "detect_leaks=1"])
        XCTAssertEqual(result.status, 0, result.output)
    }

    /// The committed fuzz corpus (Tests/Fuzz/corpus: minimised inputs, crashes found once
    /// included) replayed through the fuzz target under AddressSanitizer and UBSan: no crash, no
    /// report, no leak.
    func testFuzzCorpusReplaysCleanUnderSanitizers() throws {
        let flags = try sanitizerFlags()
        let dir = makeTemporaryDirectory(self)
        let corpus = repositoryRoot + "/Tests/Fuzz/corpus"
        let inputs = try FileManager.default.contentsOfDirectory(atPath: corpus).filter { !$0.hasPrefix(".") }
        XCTAssertGreaterThan(inputs.count, 10, "the corpus is committed")
        try build("Tests/Fuzz/fuzz_reader.c", extraFlags: flags + [repositoryRoot + "/Tests/Fuzz/replay.c"],
                  output: dir + "/replay")
        let result = try runProgram(dir + "/replay", [corpus],
                                    environment: ["ASAN_OPTIONS": "detect_leaks=1", "LOGBOOK_FUZZ_DIR": dir + "/scratch"])
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains("replayed \(inputs.count) inputs"), result.output)
    }

    func testCExampleWritesABundleTheSwiftReaderReads() throws {
        let dir = makeTemporaryDirectory(self)
        try build("Examples/c-example/main.c", output: dir + "/c-example")
        let result = try runProgram(dir + "/c-example", [dir + "/c.logbook"])
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains("2010 records, 0 dropped"), result.output)

        let (entries, issues) = try readBundle(dir + "/c.logbook")
        XCTAssertEqual(issues.count, 0, "\(issues)")
        XCTAssertEqual(entries.count, 2010)
        XCTAssertEqual(entries.first?.message, "c-example starting with 2 threads")
        XCTAssertEqual(entries.last?.message, "done: 2001 records")
        XCTAssertEqual(entries.last?.level, .warning)
        let request = try XCTUnwrap(entries.first { $0.message.hasPrefix("worker 0 request 3 ") })
        XCTAssertEqual(request.message, "worker 0 request 3 took 0.3 ms ok=true")
        XCTAssertEqual(request.arguments.map(\.type), [.int32, .int32, .double, .bool])
        XCTAssertEqual(request.file?.hasSuffix("Examples/c-example/main.c"), true)
        XCTAssertEqual(request.function, "worker")
        XCTAssertFalse(entries.contains { $0.message.hasPrefix("never recorded") })
        XCTAssertEqual(entries.filter { $0.logger == "db" }.count, 8)
    }

    /// The archiver under injected EIO (an LD_PRELOAD shim): a failed fsync is never called
    /// success, a failed write keeps the chunks in the ring and is retried, nothing is lost or
    /// archived twice.
    func testArchiverUnderInjectedIOErrors() throws {
        let dir = makeTemporaryDirectory(self)
        let shim = try runProgram(compiler, ["-shared", "-fPIC", "-O1", repositoryRoot + "/Tests/CTests/io_error_shim.c",
                                             "-o", dir + "/io_error_shim.so", "-ldl"])
        XCTAssertEqual(shim.status, 0, shim.output)
        try build("Tests/CTests/archive_io_errors.c", archiver: true, output: dir + "/archive-io-errors")
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = dir + "/io_error_shim.so"
        let result = try runProgram(dir + "/archive-io-errors", [dir], environment: environment)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains(" passed, 0 failed"), result.output)
        XCTAssertTrue(result.output.contains("fsync failed"), "the failure is said on stderr: \(result.output)")
    }

    /// The archiver failing (lossless: writers wait once, then fail fast until it writes again)
    /// and slow (overwrite: nothing dropped to protect old records; what is overwritten before it
    /// is archived is counted exactly), with the LD_PRELOAD shim.
    func testArchiverStallsCostTheWritersOneWaitAndAreCountedExactly() throws {
        let dir = makeTemporaryDirectory(self)
        let shim = try runProgram(compiler, ["-shared", "-fPIC", "-O1", repositoryRoot + "/Tests/CTests/io_error_shim.c",
                                             "-o", dir + "/io_error_shim.so", "-ldl"])
        XCTAssertEqual(shim.status, 0, shim.output)
        try build("Tests/CTests/archive_stalls.c", archiver: true, testSupport: true, output: dir + "/archive-stalls")
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = dir + "/io_error_shim.so"
        let result = try runProgram(dir + "/archive-stalls", [dir], environment: environment)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains(" passed, 0 failed"), result.output)
    }

    /// A clean close archives every chunk the ring holds, also under the overwrite policy, whose
    /// archiver pass takes at most half of the chunks no writer owns: close made one pass and
    /// returned 0 with the other half sealed, never archived (`archive lag: 32 chunks`, found by an
    /// outside test). The archive disk fails (the shim) while two threads log several laps of a
    /// ring of 64 chunks, so every chunk is sealed and none archived; then it works again and the
    /// bundle is closed: the archive files alone must hold every record the bundle shows, and no
    /// chunk may be left sealed. Three rounds.
    func testACleanCloseArchivesEveryChunkAfterTheArchiverFellBehind() throws {
        let dir = makeTemporaryDirectory(self)
        let shim = try runProgram(compiler, ["-shared", "-fPIC", "-O1", repositoryRoot + "/Tests/CTests/io_error_shim.c",
                                             "-o", dir + "/io_error_shim.so", "-ldl"])
        XCTAssertEqual(shim.status, 0, shim.output)
        try build("Tests/CTests/archive_stalls.c", archiver: true, testSupport: true, output: dir + "/archive-stalls")
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = dir + "/io_error_shim.so"
        let result = try runProgram(dir + "/archive-stalls", [dir, "clean-close"], environment: environment)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains(" passed, 0 failed"), result.output)
        XCTAssertEqual(result.output.components(separatedBy: "clean close ").count - 1, 3, result.output)
    }

    /// The power-loss simulator (Tests/CTests/power_loss.c): a forked writer stopped after counted
    /// records and its bundle copied at each stop; images whose every 4 KiB page comes from one of
    /// two copies (never from before a sync that completed) are read back: no record is shown
    /// altered, and none a sync made durable is missing while verify passes. The program also
    /// builds without -DLB_HAVE_SYNC (against a revision before lb_bundle_sync, to show what it
    /// finds there). LOGBOOK_POWERLOSS_IMAGES (images per configuration, 300 by default) and
    /// LOGBOOK_POWERLOSS_SEED pass through.
    func testPowerLossSimulator() throws {
        let flags = ["-DLB_HAVE_SYNC", "-DLB_HAVE_SYNC_INTERVAL"]
        let output = try runCTest("Tests/CTests/power_loss.c", extraFlags: flags, archiver: true, testSupport: true,
                                  environment: ProcessInfo.processInfo.environment)
        print(output.split(separator: "\n").filter { !$0.hasPrefix("    ") && !$0.hasPrefix("  image ") }
            .joined(separator: "\n"))
    }
}

/// Whether the C compiler can build with a set of sanitizer flags: probed once per test run.
final class SanitizerProbe: @unchecked Sendable {
    let flags: [String]
    private let lock = NSLock()
    private var result: [String]?

    init(_ flags: [String]) { self.flags = flags }

    func get(compiler: String) throws -> [String] {
        lock.lock()
        defer { lock.unlock() }
        if let result { return result }
        let dir = NSTemporaryDirectory() + "logbook-sanitizer-probe-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "int main(void) { return 0; }\n".write(toFile: dir + "/probe.c", atomically: true, encoding: .utf8)
        let probe = try runProgram(compiler, flags + [dir + "/probe.c", "-o", dir + "/probe"])
        result = probe.status == 0 ? flags : []
        if probe.status != 0 { print("C programs are built without \(flags): \(probe.output.prefix(200))") }
        return result!
    }
}
