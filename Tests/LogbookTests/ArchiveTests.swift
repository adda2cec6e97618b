import CLogbook
import CLogbookArchive
import CLogbookTestSupport
import Foundation
import LogbookTestKit
import Synchronization
import XCTest
@testable import Logbook

/// The archiver: rolling by size, age, count and quota; a lossless burst far larger than the ring;
/// reopening (after a close or a SIGKILL) without loss or duplicates; both write back-ends.
/// Those of its tests that CI also runs under ThreadSanitizer are in `ArchiveConcurrencyTests`.
final class ArchiveTests: XCTestCase, ArchiveTestCase {
    /// `syncArchive` archives every record logged before it, also under the overwrite policy,
    /// whose archiver takes at most half the chunks no writer holds in one pass (so that writers
    /// always find one to reuse): it returned after that one pass with sealed chunks left in the
    /// ring (found by adversarial review). Bursts of varied sizes from two threads fill most of a
    /// ring of 16 chunks, then a sync; the archive alone must hold every record so far, each once.
    func testSyncArchivesEverythingBeforeItUnderOverwrite() throws {
        for round in 0..<2 {
            let path = makeTemporaryDirectory(self) + "/sync-\(round).logbook"
            let bundle = try LogBundle(path: path, capacity: 16 * 4096, chunkSize: 4096, wrapPolicy: .overwrite,
                                       idleSealMilliseconds: 0,
                                       archive: ArchiveOptions(maxFileSize: 1 << 20, maxFiles: nil, quota: nil,
                                                               compressionLevel: round == 0 ? nil : 1))
            let log = try bundle.logger("sync")
            var expected = Set<String>()
            for burst in 0..<20 {
                let messages = (0..<2).map { thread in
                    (0..<60).map { i in "b\(burst) t\(thread) i\(i) " + String(repeating: "s", count: (i * 53 + burst) % 500) }
                }
                DispatchQueue.concurrentPerform(iterations: 2) { thread in
                    for message in messages[thread] { log.info("\(message)") }
                }
                messages.forEach { expected.formUnion($0) }
                try bundle.syncArchive()
                XCTAssertEqual(try LogReader(path: path).info().recordsOverwritten, 0, "round \(round) burst \(burst): the ring never wrapped over a sealed chunk")
                let reader = try LogReader(path: path + "/archive")
                let archived = try reader.readAll().map(\.message)
                XCTAssertEqual(archived.count, Set(archived).count, "round \(round) burst \(burst): each once")
                let missing = expected.subtracting(archived)
                XCTAssertTrue(missing.isEmpty, "round \(round) burst \(burst): \(missing.count) records logged before the sync are not archived, e.g. \(missing.first?.prefix(20) ?? "")")
                if !missing.isEmpty { break }
            }
            try bundle.close()
        }
    }

    /// Reopened after retention deleted files whose chunks the ring still holds as archived: those
    /// chunks are not archived again (they were once; their file is retired), so the files rolled
    /// afterwards hold each record of the new sessions once and no record twice, and verify passes.
    /// (Before: every reopen archived the ring's old chunks again, and an uploader sent them anew.)
    func testReopenAfterRetentionArchivesNothingTwice() throws { try reopenAfterRetention(.lossless) }

    /// The same under the overwrite policy: records the ring overwrote before the archiver took
    /// them may be missing, but none is archived twice and later launches roll only their own.
    func testReopenAfterRetentionArchivesNothingTwiceUnderOverwrite() throws { try reopenAfterRetention(.overwrite) }

    func reopenAfterRetention(_ policy: WrapPolicy) throws {
        let path = makeTemporaryDirectory(self) + "/retained.logbook"
        let rolled = Locked<[ArchivedFile]>([])
        var written = 0
        for session in 0..<4 {
            let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: policy,
                                       losslessWaitMilliseconds: 30_000,
                                       archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: 2, quota: nil,
                                                               onFileRolled: { file in rolled.withLock { $0.append(file) } }))
            let log = try bundle.logger("retained")
            let count = session == 0 ? 20_000 : 1  // a big first session, then one record per launch
            for i in 0..<count { log.info("session \(session) record \(i) \(String(repeating: "x", count: i % 50))") }
            written += count
            try bundle.close()
        }
        let files = rolled.withLock { $0 }
        // Under overwrite, chunks the archiver had not reached when session 0 closed may roll with
        // session 1 (not twice: the sum below); from then on each launch rolls its own record.
        XCTAssertTrue(files.suffix(policy == .lossless ? 3 : 2).allSatisfy { $0.records == 1 },
                      "each later launch rolls its own record only: \(files.suffix(4).map(\.records))")
        if policy == .lossless {
            XCTAssertEqual(files.reduce(0) { $0 + Int($1.records) }, written, "every record rolled exactly once")
        } else {
            XCTAssertLessThanOrEqual(files.reduce(0) { $0 + Int($1.records) }, written, "no record rolled twice")
        }
        let reader = try LogReader(path: path)
        _ = try reader.readAll()
        let summary = try reader.verify()
        XCTAssertEqual(reader.issues.filter(\.isFailure).map(\.description), [])
        XCTAssertEqual(summary.recordsLost, 0)
    }

    /// SIGKILL while the archiver runs, many times: every record the child reported as committed
    /// is in the archive after the next open, and no chunk is archived twice (the reader reports
    /// a second copy as an issue).
    func testSigkillDuringArchivingLosesNothingAndDuplicatesNothing() throws {
        let cycles = max(3, (Int(ProcessInfo.processInfo.environment["LOGBOOK_KILL_CYCLES"] ?? "") ?? 60) / 6)
        let path = makeTemporaryDirectory(self) + "/killed.logbook"
        var reported = Set<UInt64>()
        var next: UInt64 = 0
        var generator = SplitMix64(state: 4)
        for cycle in 0..<cycles {
            let first = next
            let child = ReportingChild(path: path, threads: 2, firstSequence: first, chunkSize: 4096, capacity: 64 << 10,
                                       policy: LB_WRAP_LOSSLESS, archiveFileSize: 64 << 10)
            XCTAssertGreaterThan(child.pid, 0)
            // Let it log (and archive: the ring is 16 chunks, each cycle fills it many times) for a
            // random number of records, then kill it.
            let records = Int.random(in: 1000...12_000, using: &generator)
            XCTAssertTrue(child.waitForReports(atLeast: records), "cycle \(cycle): the child ended or hung before \(records) records")
            let status = child.kill()
            XCTAssertEqual(status & 0x7f, SIGKILL, "cycle \(cycle): the child ended with status \(status)")
            reported.formUnion(child.reports)
            next = child.nextFirstSequence(after: first)
        }
        // The next open recovers: it archives what the ring holds, then the close syncs.
        let bundle = try LogBundle(path: path, wrapPolicy: .lossless, archive: ArchiveOptions(maxFiles: nil, quota: nil))
        try bundle.close()

        // Read the archive directory alone: everything must have reached the files.
        let reader = try LogReader(path: path + "/archive")
        var found = Set<UInt64>()
        var duplicates = 0
        var foreign = 0
        try reader.scan { entry in
            guard let (thread, sequence) = ShapedRecord.identify(entry, chunkSize: 4096) else { foreign += 1; return }
            if !found.insert(UInt64(thread) << 48 | sequence).inserted { duplicates += 1 }
        }
        XCTAssertEqual(foreign, 0, "records altered or mixed with another record's bytes")
        XCTAssertEqual(reader.issues.filter { $0.kind != .torn }.map(\.description), [])
        XCTAssertEqual(duplicates, 0)
        let missing = reported.subtracting(found)
        XCTAssertEqual(missing.count, 0, "\(missing.count) of \(reported.count) committed records are not in the archive")
        XCTAssertGreaterThan(reported.count, cycles * 1000)
    }

    /// A killed writer's file-being-written deleted, damaged or cut short before the bundle is
    /// reopened: chunks the ring marked archived whose copy is gone or unreadable are archived
    /// again, never reused. Every record the ring held is in the archive afterwards, and new
    /// records that wrap the ring several times lose nothing either.
    func testKilledWriterWithDamagedFileLosesNothingTheRingHeld() throws {
        for damage in ["deleted", "zeroed", "garbage", "cut", "symlink", "directory", "fifo"] {
            let root = makeTemporaryDirectory(self)
            let path = root + "/damaged.logbook"
            // Killed with a file being written (rarely the kill falls between two files: again).
            var names: [String] = []
            var first: UInt64 = 0
            for _ in 0..<5 where !names.contains(where: { $0.hasSuffix(".writing") }) {
                let start = first
                let child = ReportingChild(path: path, threads: 2, firstSequence: start, chunkSize: 4096, capacity: 64 << 10,
                                           policy: LB_WRAP_LOSSLESS, archiveFileSize: 1 << 20)
                XCTAssertTrue(child.waitForReports(atLeast: 6000), "the child ended or hung before 6,000 records")
                _ = child.kill()
                first = child.nextFirstSequence(after: start)
                names = try archiveNames(path + "/archive")
            }
            let writing = try XCTUnwrap(names.first { $0.hasSuffix(".writing") }, "\(names)")
            // What the ring alone holds: a copy of the bundle without its archive.
            let ringOnly = root + "/ring-only.logbook"
            try FileManager.default.createDirectory(atPath: ringOnly, withIntermediateDirectories: true)
            for file in ["ring", "meta"] {
                try FileManager.default.copyItem(atPath: path + "/" + file, toPath: ringOnly + "/" + file)
            }
            let inRing = Set(try readBundle(ringOnly).entries.compactMap { entry -> UInt64? in
                guard let (thread, sequence) = ShapedRecord.identify(entry, chunkSize: 4096) else { return nil }
                return UInt64(thread) << 48 | sequence
            })
            XCTAssertGreaterThan(inRing.count, 0)

            let file = path + "/archive/" + writing
            let size = (try FileManager.default.attributesOfItem(atPath: file)[.size] as! NSNumber).intValue
            switch damage {
            case "deleted": try FileManager.default.removeItem(atPath: file)
            case "zeroed", "garbage":
                let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
                try handle.seek(toOffset: UInt64(size / 3))
                handle.write(Data(repeating: damage == "zeroed" ? 0 : 0x5A, count: 8192))
                try handle.close()
            case "cut":
                let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
                try handle.truncate(atOffset: UInt64(size / 2))
                try handle.close()
            default:
                // Replaced by something the archiver must not take over (found by an outside
                // test: the reopen then skipped the reconciliation and reused the ring's chunks).
                try FileManager.default.removeItem(atPath: file)
                switch damage {
                case "symlink": try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: "/dev/null")
                case "directory": try FileManager.default.createDirectory(atPath: file, withIntermediateDirectories: false)
                default: XCTAssertEqual(mkfifo(file, 0o600), 0)
                }
            }
            let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                       losslessWaitMilliseconds: 30_000,
                                       archive: ArchiveOptions(maxFileSize: 1 << 20, maxFiles: nil, quota: nil))
            let log = try bundle.logger("after")
            for i in 0..<5000 { log.info("after the reopen \(i) \(String(repeating: "w", count: i % 50))") }
            try bundle.close()

            var archived = Set<UInt64>()
            var after = 0
            try LogReader(path: path + "/archive").scan { entry in
                if let (thread, sequence) = ShapedRecord.identify(entry, chunkSize: 4096) {
                    archived.insert(UInt64(thread) << 48 | sequence)
                } else if entry.logger == "after" {
                    after += 1
                }
            }
            let lost = inRing.subtracting(archived)
            XCTAssertEqual(lost.count, 0, "\(damage): \(lost.count) of the \(inRing.count) records the ring held were lost")
            XCTAssertEqual(after, 5000, damage)
        }
    }

    /// Killed between creating an archive file and writing its header: the empty file is removed
    /// and its number used again, so that the numbers keep no gap (verify would report one).
    func testFileCutShortWhileBeingCreatedGivesItsNumberBack() throws {
        let path = makeTemporaryDirectory(self) + "/created.logbook"
        for round in 0..<3 {
            let bundle = try LogBundle(path: path, archive: ArchiveOptions(maxFiles: nil, quota: nil))
            try bundle.logger("c").info("round \(round)")
            try bundle.close()
            let next = try archiveNames(path + "/archive").count + 1
            FileManager.default.createFile(atPath: path + "/archive/" + String(format: "archive-%010d.lba.writing", next),
                                           contents: round == 1 ? Data([1, 2, 3]) : Data())
        }
        let bundle = try LogBundle(path: path, archive: ArchiveOptions(maxFiles: nil, quota: nil))
        try bundle.close()
        XCTAssertEqual(try archiveNames(path + "/archive"),
                       ["archive-0000000001.lba.zst", "archive-0000000002.lba.zst", "archive-0000000003.lba.zst"])
        let reader = try LogReader(path: path)
        XCTAssertEqual(try reader.readAll().map(\.message), ["round 0", "round 1", "round 2"])
        _ = try reader.verify()
        XCTAssertEqual(reader.issues.map(\.description), [])
    }
}
