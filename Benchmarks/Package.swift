// swift-tools-version:6.1
// Logbook's benchmarks: a nested package so that the benchmark dependency never slows the main
// build or CI. Run with ./run.sh (or `swift package benchmark` here).
import PackageDescription

/// SwiftPM names a path dependency after its directory, which is whatever the repository was
/// cloned as; find that name rather than assume it.
let logbookPackage = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "Logbook")

let package = Package(
    name: "LogbookBenchmarks",
    dependencies: [
        .package(path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // C loops for the "C API called from C" rows: the same record written by C code.
        .target(
            name: "CBenchSupport",
            dependencies: [.product(name: "CLogbook", package: logbookPackage)]
        ),
        .executableTarget(
            name: "LogbookWrite",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Logbook", package: logbookPackage),
                .product(name: "CLogbook", package: logbookPackage),
                "CBenchSupport",
            ],
            path: "Benchmarks/LogbookWrite",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
