import Foundation
import LogbookTestKit
import XCTest

/// A package that depends on Logbook, as a server's would: built in release mode, its build prints
/// no diagnostic from Logbook's headers (the inlined logging paths import logbook.h's C
/// functions), and the install step of the "Logbook in a Server" article builds the `logbook`
/// command from it, which then reads what the client logged.
final class ClientPackageTests: XCTestCase {
    func testADependentPackageBuildsCleanlyAndInstallsTheCommand() throws {
        let swift = ["/usr/bin/swift", "/opt/swift/usr/bin/swift"].first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":").map { $0 + "/swift" }
                .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let swift else { throw XCTSkip("no swift executable in PATH") }
        let package = makeTemporaryDirectory(self) + "/client"
        try FileManager.default.createDirectory(atPath: package + "/Sources/App", withIntermediateDirectories: true)
        try """
            // swift-tools-version:6.1
            import PackageDescription
            let package = Package(
                name: "App",
                dependencies: [.package(path: "\(repositoryRoot)")],
                targets: [
                    .executableTarget(name: "App", dependencies: [
                        .product(name: "Logbook", package: "\(URL(fileURLWithPath: repositoryRoot).lastPathComponent.lowercased())"),
                    ]),
                ]
            )
            """.write(toFile: package + "/Package.swift", atomically: true, encoding: .utf8)
        try """
            import Logbook
            let bundle = try LogBundle(path: CommandLine.arguments[1], createParentDirectories: true)
            let log = try bundle.logger("app").with(metadata: ["request_id": "7f3a"])
            let (id, ms, ok) = (42, 2.5, true)
            log.info("request \\(id) took \\(ms) ms ok=\\(ok)", metadata: ["user": "alice"])
            try bundle.close()
            """.write(toFile: package + "/Sources/App/main.swift", atomically: true, encoding: .utf8)

        let build = try runProgram(swift, ["build", "-c", "release", "--package-path", package])
        XCTAssertEqual(build.status, 0, build.output)
        let fromLogbook = build.output.split(separator: "\n").filter {
            ($0.contains("warning:") || $0.contains("note:") || $0.contains("error:")) &&
                ($0.contains(repositoryRoot) || $0.contains("logbook.h") || $0.contains("logbook_format.h"))
        }
        XCTAssertEqual(fromLogbook, [], "diagnostics from Logbook in a client's build:\n\(build.output)")

        // The article's install step: the command of the dependency, built from the client.
        let command = try runProgram(swift, ["build", "-c", "release", "--package-path", package, "--product", "logbook"])
        XCTAssertEqual(command.status, 0, command.output)
        let bin = try runProgram(swift, ["build", "-c", "release", "--package-path", package, "--show-bin-path"])
        let directory = bin.output.split(separator: "\n").last.map(String.init) ?? ""
        let bundle = makeTemporaryDirectory(self) + "/logs/app.logbook"
        let app = try runProgram(directory + "/App", [bundle])
        XCTAssertEqual(app.status, 0, app.output)
        let shown = try runProgram(directory + "/logbook", ["show", "--where", "request_id=7f3a", bundle])
        XCTAssertEqual(shown.status, 0, shown.output)
        XCTAssertTrue(shown.output.contains("request 42 took 2.5 ms ok=true"), shown.output)
        XCTAssertTrue(shown.output.contains("user=alice"), shown.output)
    }
}
