// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Logbook",
    products: [
        .library(name: "Logbook", targets: ["Logbook"]),
        .library(name: "CLogbook", targets: ["CLogbook"]),
        .library(name: "CLogbookArchive", targets: ["CLogbookArchive"]),
        .executable(name: "logbook", targets: ["LogbookCLI"]),
        .executable(name: "logbook-demo", targets: ["LogbookDemo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        .target(
            name: "CLogbook",
            path: "CSources/CLogbook"
        ),
        // The archiver: links liburing (Debian: liburing-dev), falls back to pwritev at run time.
        .target(
            name: "CLogbookArchive",
            dependencies: ["CLogbook"],
            path: "CSources/CLogbookArchive",
            linkerSettings: [.linkedLibrary("uring")]
        ),
        .target(name: "Logbook", dependencies: ["CLogbook", "CLogbookArchive"]),
        .executableTarget(
            name: "LogbookCLI",
            dependencies: ["Logbook", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(name: "LogbookDemo", dependencies: ["Logbook"]),
        .target(name: "CLogbookTestSupport", dependencies: ["CLogbook", "CLogbookArchive"], path: "Tests/CLogbookTestSupport"),
        .testTarget(name: "LogbookTests", dependencies: ["Logbook", "CLogbook", "CLogbookArchive", "CLogbookTestSupport"]),
    ]
)
