import Foundation
import Synchronization
import XCTest

/// Type-checks Swift source as a user's program would see the package: `swiftc -typecheck`
/// against the modules `swift build` put next to this test bundle (Logbook, LogbookLogging,
/// LogbookTesting, swift-log's Logging), the C modules' module maps and XCTest.
package struct BuiltModules {
    /// The compiler of the toolchain this test bundle runs on.
    package let swiftc: String
    package let arguments: [String]

    /// Finds the compiler and the build products, or throws `XCTSkip` saying what is missing
    /// (e.g. the test bundle was copied away from its `.build` directory): never a silent pass.
    package static func find() throws -> BuiltModules {
        let bin = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().path
        // Swift 6 puts the modules in `Modules`; earlier versions next to the products.
        let modules = [bin + "/Modules", bin].first { exists($0 + "/Logbook.swiftmodule") }
        guard let modules else {
            throw XCTSkip("no Logbook.swiftmodule in \(bin)/Modules or \(bin): run `swift build --build-tests` first")
        }
        var arguments = [
            "-I", modules, "-module-cache-path", bin + "/ModuleCache", "-swift-version", "6", "-diagnostic-style", "llvm",
        ]
        for (module, include) in [("CLogbook", "CSources/CLogbook/include"),
                                  ("CLogbookArchive", "CSources/CLogbookArchive/include"),
                                  ("CLogbookUpload", "CSources/CLogbookUpload/include"),
                                  ("CLogbookCache", "CSources/CLogbookCache/include"),
                                  ("CLogbookGzip", "CSources/CLogbookGzip/include"),
                                  ("CLogbookQuery", "CSources/CLogbookQuery/include")] {
            let map = "\(bin)/\(module).build/module.modulemap"
            guard exists(map) else { throw XCTSkip("no module map for \(module) at \(map): run `swift build` first") }
            arguments += ["-Xcc", "-fmodule-map-file=" + map, "-Xcc", "-I", "-Xcc", repositoryRoot + "/" + include]
        }
        guard let swiftc = toolchainCompiler() else {
            throw XCTSkip("swiftc not found next to the Swift runtime this test runs on, nor in PATH")
        }
        return BuiltModules(swiftc: swiftc, arguments: arguments)
    }

    /// The `swiftc` of the runtime loaded in this process (a compiler of another version could not
    /// read the modules), else the first in `PATH`.
    private static func toolchainCompiler() -> String? {
        let maps = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? ""
        if let core = maps.split(separator: "\n").lazy.compactMap({ $0.split(separator: " ").last })
            .first(where: { $0.hasSuffix("/libswiftCore.so") }) {
            // TOOLCHAIN/usr/lib/swift/linux/libswiftCore.so -> TOOLCHAIN/usr/bin/swiftc
            var url = URL(fileURLWithPath: String(core))
            for _ in 0..<4 { url.deleteLastPathComponent() }
            let swiftc = url.appendingPathComponent("bin/swiftc").path
            if FileManager.default.isExecutableFile(atPath: swiftc) { return swiftc }
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return path.split(separator: ":").map { $0 + "/swiftc" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Type-checks each source as the `main.swift` of its own program (top-level code), two at a
    /// time, and returns the exit status and diagnostics of each, in order.
    package func typecheck(_ sources: [String], in directory: String) -> [(status: Int32, output: String)] {
        let results = Mutex([(status: Int32, output: String)](repeating: (-1, ""), count: sources.count))
        DispatchQueue.concurrentPerform(iterations: sources.count) { index in
            let folder = "\(directory)/snippet-\(index)"
            let file = folder + "/main.swift"
            let result: (status: Int32, output: String)
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                try sources[index].write(toFile: file, atomically: true, encoding: .utf8)
                result = try runProgram(swiftc, ["-typecheck", file] + arguments)
            } catch {
                result = (-1, "could not run \(swiftc): \(error)")
            }
            results.withLock { $0[index] = result }
        }
        return results.withLock { $0 }
    }
}
