// swift-tools-version:6.1
// Logbook's benchmarks: a nested package so that the benchmark dependencies never slow the main
// build or CI. Run ./run.sh (it writes docs/BENCHMARKS.md), or `swift package benchmark` here.
import PackageDescription

/// SwiftPM names a path dependency after its directory, which is whatever the repository was
/// cloned as; find that name rather than assume it.
let logbookPackage = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "Logbook")

let benchmarkTarget: (String, [Target.Dependency]) -> Target = { name, dependencies in
    .executableTarget(
        name: name,
        dependencies: [.product(name: "Benchmark", package: "benchmark")] + dependencies,
        path: "Benchmarks/\(name)",
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    )
}

let package = Package(
    name: "LogbookBenchmarks",
    dependencies: [
        .package(path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.3.0"),
    ],
    targets: [
        // C loops for the "C API called from C" rows: the same record written by C code.
        .target(name: "CBenchSupport", dependencies: [.product(name: "CLogbook", package: logbookPackage)]),
        // The Logbook write path in pure Swift, same bytes, no C of ours.
        .target(name: "PureSwiftLogbook", dependencies: [.product(name: "Atomics", package: "swift-atomics")]),
        // Debian's libsqlite3-dev.
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        benchmarkTarget("LogbookWrite", [
            .product(name: "Logbook", package: logbookPackage),
            .product(name: "CLogbook", package: logbookPackage),
            "CBenchSupport",
        ]),
        benchmarkTarget("Peers", [
            .product(name: "Logbook", package: logbookPackage),
            .product(name: "Logging", package: "swift-log"),
            "PureSwiftLogbook",
            "CSQLite",
        ]),
        benchmarkTarget("SwiftLog", [
            .product(name: "Logbook", package: logbookPackage),
            .product(name: "LogbookLogging", package: logbookPackage),
            .product(name: "Logging", package: "swift-log"),
        ]),
        benchmarkTarget("Reader", [
            .product(name: "Logbook", package: logbookPackage),
            .product(name: "CLogbook", package: logbookPackage),
        ]),
        // The message cache against the reference's pattern and SQLite (cache.sh): per-append
        // percentiles it measures itself, interleaved rounds.
        .executableTarget(
            name: "CacheBench",
            dependencies: [
                .product(name: "LogbookCache", package: logbookPackage),
                .product(name: "CLogbookCache", package: logbookPackage),
                "CSQLite",
            ]
        ),
        // Export (export.sh): OTLP encodings and delivery beside `show --json`.
        .executableTarget(
            name: "ExportBench",
            dependencies: [
                .product(name: "Logbook", package: logbookPackage),
                .product(name: "LogbookExport", package: logbookPackage),
            ]
        ),
        // Syslog against rsyslog forwarding the same lines (syslog.sh): writes the
        // bundle and times until the receiving rsyslog has written every line.
        .executableTarget(
            name: "SyslogBench",
            dependencies: [.product(name: "Logbook", package: logbookPackage)]
        ),
        // The read side (read.sh): streaming, rendering and statistics, records/s.
        .executableTarget(
            name: "ReadBench",
            dependencies: [
                .product(name: "Logbook", package: logbookPackage),
                .product(name: "CLogbook", package: logbookPackage),
                .product(name: "LogbookStatistics", package: logbookPackage),
            ]
        ),
        // SQL over records (query.sh): writes the bundle that `logbook query`, lnav and jq answer
        // the same questions over.
        .executableTarget(
            name: "QueryBench",
            dependencies: [.product(name: "Logbook", package: logbookPackage)]
        ),
        .testTarget(
            name: "PureSwiftLogbookTests",
            dependencies: ["PureSwiftLogbook", .product(name: "Logbook", package: logbookPackage)]
        ),
    ]
)
