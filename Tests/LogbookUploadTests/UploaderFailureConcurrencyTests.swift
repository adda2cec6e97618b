import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
@testable import LogbookUpload

/// The uploader's failures while threads submit and it uploads: many threads at once, consent and
/// purge, quotas, rolled archive files, a damaged state.
final class UploaderFailureConcurrencyTests: XCTestCase, UploaderFailureTestCase {
    /// Eight threads submit 25 items each (0 bytes to 200 KB, data and files) while the workers
    /// upload: every item arrives whole, the counters add up, and the spool ends empty.
    func testManyThreadsSubmitWhileUploading() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let uploader = try Uploader(.init(spool: dir + "/spool", maxConcurrentUploads: 3, makeRequest: request(server.url("/ok"))))
        uploader.start()
        let submitted = Locked<[String: [UInt8]]>([:])
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            var generator = SplitMix64(state: UInt64(thread + 1))
            for index in 0..<25 {
                let size = [0, 1, 63, 64, 4096, 65_537, 200_000][Int.random(in: 0..<7, using: &generator)]
                var bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
                bytes += Array("\(thread)-\(index)".utf8)  // distinct content, distinct ids
                do {
                    let item: SpooledItem
                    if index % 2 == 0 {
                        item = try uploader.submit(data: bytes)
                    } else {
                        let path = dir + "/file-\(thread)-\(index)"
                        try Data(bytes).write(to: URL(fileURLWithPath: path))
                        item = try uploader.submit(file: path)
                    }
                    submitted.withLock { $0[item.id] = bytes }
                } catch {
                    XCTFail("\(error)")
                }
            }
        }
        let seen = await outcomes(uploader, count: 200)
        await uploader.stop()
        XCTAssertEqual(seen.count, 200)
        XCTAssertEqual(Set(seen), Set(submitted.withLock { $0.keys }.map { Uploader.Outcome.delivered(id: $0, attempts: 1) }))
        for (id, bytes) in submitted.withLock({ $0 }) {
            XCTAssertEqual(try? Array(Data(contentsOf: URL(fileURLWithPath: server.bodies + "/" + id))), bytes, id)
        }
        let statistics = uploader.statistics
        XCTAssertEqual(statistics.delivered, 200)
        XCTAssertEqual(statistics.pendingItems, 0)
        XCTAssertEqual(statistics.deliveredBytes, submitted.withLock { $0.values.reduce(0) { $0 + $1.count } })
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir + "/spool").filter { $0 != "lock" }, [])
    }

    /// A state file damaged between launches: that item is quarantined and reported, the others
    /// are delivered.
    func testADamagedStateIsQuarantinedAndTheOthersGoOn() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let spool = dir + "/spool"
        let ids = try spoolItems(["a", "b", "c"], in: spool, server: server)
        let damaged = spool + "/" + ids[1] + ".state"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: damaged))
        bytes[13] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: damaged))
        let uploader = try Uploader(.init(spool: spool, makeRequest: request(server.url("/ok"))))
        uploader.start()
        let seen = await outcomes(uploader, count: 3)
        await uploader.stop()
        XCTAssertEqual(seen.first, .quarantined(id: ids[1]))
        XCTAssertEqual(Set(seen.dropFirst()), [.delivered(id: ids[0], attempts: 1), .delivered(id: ids[2], attempts: 1)])
        XCTAssertEqual(uploader.statistics.quarantined, 1)
        XCTAssertTrue(FileManager.default.fileExists(atPath: spool + "/quarantine/" + ids[1] + ".data"))
    }

    /// Quotas by items, bytes and age: the oldest pending items go first, each reported; an item
    /// larger than the byte quota alone is refused.
    func testQuotasDropTheOldestFirstAndSaySo() async throws {
        let dir = makeTemporaryDirectory(self)
        let now = Locked<Int64>(1_000_000_000_000)
        let clock: @Sendable () -> Int64 = { now.withLock { $0 } }
        let uploader = try Uploader(.init(spool: dir + "/spool", quota: .init(maxBytes: 1000, maxItems: 3, maxAge: .seconds(60)),
                                          isAllowed: false, clock: clock, makeRequest: request(URL(string: "http://127.0.0.1:9/")!)))
        var ids: [String] = []
        for index in 0..<5 {
            now.withLock { $0 += 1_000_000 }
            ids.append(try uploader.submit(data: [UInt8](repeating: UInt8(index), count: 100)).id)
        }
        XCTAssertEqual(uploader.pending.map(\.id), Array(ids[2...]))
        now.withLock { $0 += 1_000_000 }
        ids.append(try uploader.submit(data: [UInt8](repeating: 9, count: 800)).id)  // 100+100+800 > 1000
        XCTAssertEqual(uploader.pending.map(\.id), [ids[3], ids[4], ids[5]], "1100 bytes: the oldest goes")
        XCTAssertThrowsError(try uploader.submit(data: [UInt8](repeating: 1, count: 1001))) { error in
            XCTAssertEqual((error as? LogbookError)?.errno, EFBIG)
            XCTAssertTrue("\(error)".contains("quota of 1000 bytes"), "\(error)")
        }
        now.withLock { $0 += 61_000_000_000 }
        uploader.isAllowed = true
        uploader.start()
        let seen = await outcomes(uploader, count: 6)
        await uploader.stop()
        XCTAssertEqual(seen, [
            .dropped(id: ids[0], reason: "the spool's quota of 3 items was reached"),
            .dropped(id: ids[1], reason: "the spool's quota of 3 items was reached"),
            .dropped(id: ids[2], reason: "the spool's quota of 1000 bytes was reached"),
            .dropped(id: ids[3], reason: "older than the spool's age limit of 60.0 seconds"),
            .dropped(id: ids[4], reason: "older than the spool's age limit of 60.0 seconds"),
            .dropped(id: ids[5], reason: "older than the spool's age limit of 60.0 seconds"),
        ])
        XCTAssertEqual(uploader.statistics.dropped, 6)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir + "/spool").filter { $0 != "lock" }, [])
    }

    /// Without consent nothing is sent; a purge drops everything unsent; consent given, new items go.
    func testConsentHoldsUploadsAndPurgeRemovesTheSpool() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir)
        let uploader = try Uploader(.init(spool: dir + "/spool", isAllowed: false, makeRequest: request(server.url("/ok"))))
        let held = try uploader.submit(data: [1])
        uploader.start()
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(server.requests().count, 0, "nothing sent without consent")
        XCTAssertEqual(uploader.purge(), 1)
        let allowed = try uploader.submit(data: [2])
        uploader.isAllowed = true
        let seen = await outcomes(uploader, count: 2)
        await uploader.stop()
        XCTAssertEqual(seen, [.dropped(id: held.id, reason: "purged"), .delivered(id: allowed.id, attempts: 1)])
        XCTAssertEqual(server.requests().count, 1)
    }

    /// The archive wiring: files rolled while uploads are held, deleted by retention (2 files kept)
    /// before any upload; all of them still arrive, whole (the server's copies read back as the
    /// records written), and a relaunch submits none of them again.
    func testRolledArchiveFilesArriveEvenAfterRetentionDeletedThem() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let uploader = try Uploader(.init(spool: dir + "/spool", isAllowed: false, makeRequest: request(server.url("/ok"))))
        let bundlePath = dir + "/app.logbook"
        var written = 0
        do {
            // 8 chunks: a round (up to 4 chunks) never wraps onto its own chunks before the archiver
            // took them, however late it runs; rollArchive archives each round before the next.
            let bundle = try LogBundle(path: bundlePath, capacity: 8 * 65536, chunkSize: 65536,
                                       archive: ArchiveOptions(maxFileSize: 65536 * 2, maxFiles: 2,
                                                               onFileRolled: { uploader.submit(archive: $0) }))
            let logger = try bundle.logger("upload")
            for round in 0..<6 {
                for index in 0..<(200 + round * 50) {
                    let text = String(repeating: "x", count: (index * 37) % 900)
                    logger.info("round \(round) record \(index) \(text)")
                    written += 1
                }
                try bundle.rollArchive()
            }
            try bundle.close()
        }
        let rolled = uploader.pending.count
        XCTAssertGreaterThanOrEqual(rolled, 6)
        let kept = try FileManager.default.contentsOfDirectory(atPath: bundlePath + "/archive").filter { $0.hasSuffix(".lba.zst") }
        XCTAssertLessThan(kept.count, rolled, "retention deleted files before they were uploaded")
        uploader.isAllowed = true
        uploader.start()
        let seen = await outcomes(uploader, count: rolled)
        await uploader.stop()
        XCTAssertEqual(seen.filter { if case .delivered = $0 { true } else { false } }.count, rolled, "\(seen)")
        // The server's copies are an archive directory holding every record written.
        let copies = dir + "/copies"
        try FileManager.default.createDirectory(atPath: copies, withIntermediateDirectories: true)
        for (number, name) in try FileManager.default.contentsOfDirectory(atPath: server.bodies).sorted(by: { a, b in
            Int(a.split(separator: "-").last!)! < Int(b.split(separator: "-").last!)!
        }).enumerated() {
            try FileManager.default.copyItem(atPath: server.bodies + "/" + name,
                                             toPath: copies + String(format: "/archive-%010d.lba", number + 1))
        }
        let (entries, _) = try readBundle(copies)
        XCTAssertEqual(entries.count, written, "every record arrived once")
        XCTAssertEqual(Set(entries.map(\.message)).count, written)
        // Relaunch: the files left in the archive are marked delivered; nothing goes twice.
        let relaunched = try Uploader(.init(spool: dir + "/spool-2", makeRequest: request(server.url("/ok"))))
        XCTAssertEqual(try relaunched.submitArchives(in: bundlePath), [], "marked delivered (user.logbook.delivered)")
    }
}
