// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Logbook",
    products: [
        .library(name: "Logbook", targets: ["Logbook"]),
        .library(name: "CLogbook", targets: ["CLogbook"]),
        .library(name: "CLogbookArchive", targets: ["CLogbookArchive"]),
        .library(name: "LogbookLogging", targets: ["LogbookLogging"]),
        .library(name: "LogbookTesting", targets: ["LogbookTesting"]),
        .library(name: "LogbookUpload", targets: ["LogbookUpload"]),
        .library(name: "LogbookExport", targets: ["LogbookExport"]),
        .library(name: "LogbookCache", targets: ["LogbookCache"]),
        .library(name: "LogbookStatistics", targets: ["LogbookStatistics"]),
        .library(name: "LogbookQuery", targets: ["LogbookQuery"]),
        .library(name: "CLogbookCache", targets: ["CLogbookCache"]),
        .library(name: "LogbookMetrics", targets: ["LogbookMetrics"]),
        .library(name: "LogbookLifecycle", targets: ["LogbookLifecycle"]),
        .executable(name: "logbook", targets: ["LogbookCLI"]),
        .executable(name: "logbook-demo", targets: ["LogbookDemo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // The core links libzstd (Debian: libzstd-dev): the reader reads compressed archive files.
        .target(
            name: "CLogbook",
            path: "CSources/CLogbook",
            linkerSettings: [.linkedLibrary("zstd")]
        ),
        // The archiver: links liburing (Debian: liburing-dev), falls back to pwritev at run time.
        .target(
            name: "CLogbookArchive",
            dependencies: ["CLogbook"],
            path: "CSources/CLogbookArchive",
            linkerSettings: [.linkedLibrary("uring")]
        ),
        .target(name: "Logbook", dependencies: ["CLogbook", "CLogbookArchive"]),
        // The swift-log backend: its own module, so that the core never depends on swift-log.
        .target(
            name: "LogbookLogging",
            dependencies: ["Logbook", "CLogbook", .product(name: "Logging", package: "swift-log")]
        ),
        // For users' tests: capture entries and assert on them (no XCTest or swift-testing needed).
        .target(name: "LogbookTesting", dependencies: ["Logbook"]),
        // Delivery to HTTP servers: the one HTTP layer of the uploader and the exporters (libcurl;
        // Debian: libcurl4-openssl-dev), the checks of content against its key, SHA-256.
        .target(name: "CLogbookUpload", dependencies: ["CLogbook"], path: "CSources/CLogbookUpload",
                linkerSettings: [.linkedLibrary("curl")]),
        // The message cache's C layer: frames on the core's commit protocol (logbook_cache.h).
        .target(name: "CLogbookCache", dependencies: ["CLogbook"], path: "CSources/CLogbookCache"),
        .target(name: "LogbookCache", dependencies: ["Logbook", "CLogbookCache"]),
        .target(name: "LogbookUpload", dependencies: ["Logbook", "CLogbook", "CLogbookUpload"]),
        // Export to log pipelines (OTLP/HTTP, syslog), delivered through LogbookUpload's RetryPolicy.
        .target(name: "CLogbookGzip", path: "CSources/CLogbookGzip", linkerSettings: [.linkedLibrary("z"), .linkedLibrary("zstd")]),
        .target(name: "LogbookExport", dependencies: ["Logbook", "CLogbook", "LogbookUpload", "CLogbookGzip"]),
        // Statistics over typed arguments (percentiles per call site) and the HTML report.
        .target(name: "LogbookStatistics", dependencies: ["Logbook"]),
        // SQL over typed records: SQLite virtual tables over the streaming reader (logbook_query.h;
        // Debian: libsqlite3-dev), and its Swift API with percentile() from the statistics.
        .target(name: "CLogbookQuery", dependencies: ["CLogbook"], path: "CSources/CLogbookQuery",
                linkerSettings: [.linkedLibrary("sqlite3")]),
        .target(name: "LogbookQuery", dependencies: ["Logbook", "CLogbook", "CLogbookQuery", "LogbookStatistics"]),
        .executableTarget(
            name: "LogbookCLI",
            dependencies: ["Logbook", "LogbookUpload", "LogbookExport", "LogbookStatistics", "LogbookQuery", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // Health of a bundle (and its archiver, uploaders, exporters) through swift-metrics, polled.
        .target(
            name: "LogbookMetrics",
            dependencies: ["Logbook", "LogbookUpload", "LogbookExport", .product(name: "Metrics", package: "swift-metrics")]
        ),
        // A swift-service-lifecycle Service: the bundle open while the group runs, sealed, synced
        // and closed on graceful shutdown.
        .target(
            name: "LogbookLifecycle",
            dependencies: ["Logbook", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]
        ),
        .executableTarget(name: "LogbookDemo", dependencies: ["Logbook"]),
        // A server in a ServiceGroup that logs until SIGTERM (the example of LogbookLifecycle, and the
        // child process of its SIGTERM test).
        .executableTarget(
            name: "LogbookServiceExample",
            dependencies: [
                "Logbook", "LogbookLifecycle", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "CLogbookTestSupport", dependencies: ["CLogbook", "CLogbookArchive"], path: "Tests/CLogbookTestSupport"),
        // Tests: one target per module under test, each named after it; what they share (temporary
        // directories, running programs, the test servers, type-checking snippets) is LogbookTestKit.
        // CI runs the classes whose names end in `ConcurrencyTests` under ThreadSanitizer as well.
        .target(name: "LogbookTestKit", dependencies: ["Logbook"], path: "Tests/LogbookTestKit"),
        // The core and its C layers (the C test programs too: CProgramTests).
        .testTarget(
            name: "LogbookTests",
            dependencies: [
                "Logbook", "CLogbook", "CLogbookArchive", "CLogbookTestSupport", "LogbookTestKit", "LogbookTesting",
                "LogbookLogging", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The README's and the DocC articles' examples compile against every module.
        .testTarget(
            name: "LogbookDocumentationTests",
            dependencies: [
                "LogbookTestKit", "Logbook", "LogbookLogging", "LogbookTesting", "LogbookUpload", "LogbookExport",
                "LogbookCache", "LogbookStatistics", "LogbookMetrics", "LogbookLifecycle", "LogbookQuery",
            ]
        ),
        .testTarget(
            name: "LogbookLoggingTests",
            dependencies: ["Logbook", "LogbookLogging", "LogbookTesting", "LogbookTestKit", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(name: "LogbookTestingTests", dependencies: ["Logbook", "LogbookTesting", "LogbookTestKit"]),
        .testTarget(name: "LogbookUploadTests", dependencies: ["Logbook", "CLogbook", "CLogbookUpload", "LogbookUpload", "LogbookTestKit"]),
        .testTarget(
            name: "LogbookExportTests",
            dependencies: ["Logbook", "CLogbook", "LogbookExport", "LogbookUpload", "LogbookTesting", "LogbookTestKit"]
        ),
        .testTarget(name: "LogbookCacheTests", dependencies: ["Logbook", "CLogbook", "LogbookCache", "LogbookTestKit"]),
        .testTarget(name: "LogbookStatisticsTests", dependencies: ["Logbook", "LogbookStatistics", "LogbookTestKit"]),
        .testTarget(name: "LogbookQueryTests", dependencies: ["Logbook", "LogbookQuery", "LogbookLogging", "LogbookTestKit", .product(name: "Logging", package: "swift-log")]),
        .testTarget(
            name: "LogbookMetricsTests",
            dependencies: [
                "Logbook", "CLogbook", "LogbookMetrics", "LogbookUpload", "LogbookExport", "LogbookTestKit",
                .product(name: "Logging", package: "swift-log"), .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "LogbookLifecycleTests",
            dependencies: [
                "Logbook", "LogbookLifecycle", "LogbookTestKit", .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The `logbook` command as a user runs it.
        .testTarget(
            name: "LogbookCLITests",
            dependencies: ["Logbook", "LogbookLogging", "LogbookExport", "LogbookTestKit", .product(name: "Logging", package: "swift-log")]
        ),
    ]
)
