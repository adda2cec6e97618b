import Foundation
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

    func build(_ source: String, extraFlags: [String] = [], output: String) throws {
        let core = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/CSources/CLogbook/src")
            .filter { $0.hasSuffix(".c") }.map { repositoryRoot + "/CSources/CLogbook/src/" + $0 }
        let flags = ["-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-pthread",
                     "-I", repositoryRoot + "/CSources/CLogbook/include"]
        let result = try runProgram(compiler, flags + extraFlags + [repositoryRoot + "/" + source] + core + ["-o", output])
        XCTAssertEqual(result.status, 0, "compiling \(source) failed:\n\(result.output)")
    }

    func testCCoreTestProgramPasses() throws {
        let binary = makeTemporaryDirectory(self) + "/core-test"
        try build("Tests/CTests/core_test.c", output: binary)
        let result = try runProgram(binary, [])
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains(" passed, 0 failed"), result.output)
    }

    func testCCoreTestProgramIsCleanUnderAddressAndUndefinedSanitizers() throws {
        let dir = makeTemporaryDirectory(self)
        let binary = dir + "/core-test-asan"
        let flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
        try "int main(void) { return 0; }\n".write(toFile: dir + "/probe.c", atomically: true, encoding: .utf8)
        let probe = try runProgram(compiler, flags + [dir + "/probe.c", "-o", dir + "/probe"])
        if probe.status != 0 {
            throw XCTSkip("the C compiler cannot build with sanitizers here: \(probe.output.prefix(200))")
        }
        try build("Tests/CTests/core_test.c", extraFlags: flags, output: binary)
        let result = try runProgram(binary, [], environment: ["ASAN_OPTIONS": "detect_leaks=1"])
        XCTAssertEqual(result.status, 0, result.output)
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
}
