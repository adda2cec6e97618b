// swift-tools-version:6.1
// The resumable-upload server of the uploader's tests: swift-nio-extras' NIOResumableUpload
// (draft-ietf-httpbis-resumable-upload, interop versions 3, 5 and 6) on 127.0.0.1. A package of its
// own, so that Logbook itself never depends on swift-nio; `scripts/test` builds it.
import PackageDescription

let package = Package(
    name: "ResumableUploadServer",
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        .executableTarget(
            name: "ResumableUploadServer",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOResumableUpload", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        )
    ]
)
