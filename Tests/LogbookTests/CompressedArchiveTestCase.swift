import CLogbook
import Foundation
import LogbookTestKit
import Synchronization
import XCTest
@testable import Logbook

/// The footer of a compressed file and its seek table (docs/FORMAT.md).
struct CompressedFileLayout {
    var frames: [(offset: Int, length: Int, uncompressed: Int)]
    var listingOffset: Int
    var tableOffset: Int
    var size: Int
}

/// What `CompressedArchiveTests` and `CompressedArchiveConcurrencyTests` share.
protocol CompressedArchiveTestCase: XCTestCase {}

extension CompressedArchiveTestCase {
    typealias Layout = CompressedFileLayout

    func layout(_ file: String) throws -> Layout {
        let data = try Data(contentsOf: URL(fileURLWithPath: file))
        func u64(_ at: Int) -> Int { Int(data[at..<at + 8].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }) }
        func u32(_ at: Int) -> Int { Int(data[at..<at + 4].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }) }
        let footer = data.count - 64
        XCTAssertEqual(String(decoding: data[footer + 48..<footer + 56], as: UTF8.self), "LBZSTEND")
        var frames: [(Int, Int, Int)] = []
        var at = u64(footer + 8)
        for i in 0..<u32(footer + 40) {
            let entry = u64(footer + 32) + i * 16
            frames.append((at, u32(entry), u32(entry + 4)))
            at += u32(entry)
        }
        return Layout(frames: frames, listingOffset: u64(footer + 16), tableOffset: u64(footer + 32), size: data.count)
    }

    func archiveNames(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path + "/archive").filter { $0.hasPrefix("archive-") }.sorted()
    }

    /// A record of varied size: short and long strings, metadata on some.
    func message(_ i: Int) -> String { "request \(i) path \(String(repeating: "p", count: (i * 37) % 700))" }

    /// A lossless bundle whose records fill compressed files of 4 MiB (several data frames each).
    func makeBundle(records: Int = 60_000, maxFileSize: Int = 4 << 20, level: Int? = 1,
                    rolled: Locked<[ArchivedFile]>? = nil) throws -> String {
        let path = makeTemporaryDirectory(self) + "/z.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 64 << 10, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: maxFileSize, maxFiles: nil, quota: nil,
                                                           compressionLevel: level,
                                                           onFileRolled: { file in rolled?.withLock { $0.append(file) } }))
        let log = try bundle.logger("z")
        for i in 0..<records {
            if i % 10 == 0 {
                log.info("\(message(i))", metadata: ["user": "u\(i)", "size": .init(i)])
            } else {
                log.info("\(message(i))")
            }
        }
        try bundle.close()
        return path
    }

    func readAll(_ path: String) throws -> (messages: [String], issues: [LogIssue], summary: VerifySummary?) {
        let reader = try LogReader(path: path)
        var messages: [String] = []
        try reader.scan { messages.append($0.message) }
        let summary = FileManager.default.fileExists(atPath: path + "/ring") ? try reader.verify() : nil
        return (messages, reader.issues, summary)
    }
}
