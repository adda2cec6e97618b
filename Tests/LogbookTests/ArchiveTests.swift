import CLogbook
import CLogbookArchive
import CLogbookTestSupport
import Foundation
import Synchronization
import XCTest
@testable import Logbook

/// The archiver: rolling by size, age, count and quota; a lossless burst far larger than the ring;
/// reopening (after a close or a SIGKILL) without loss or duplicates; both write back-ends.
final class ArchiveTests: XCTestCase {
    /// The back-end this machine should pick: io_uring unless the kernel disables it.
    var expectedDefaultBackend: String {
        let disabled = (try? String(contentsOfFile: "/proc/sys/kernel/io_uring_disabled", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return disabled == nil || disabled == "0" ? "io_uring" : "pwrite"
    }

    /// Archive file names in `directory`, sorted.
    func archiveNames(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("archive-") }.sorted()
    }

    func size(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as! NSNumber).intValue
    }

    /// Files roll before they would pass maxFileSize; each complete file is announced once, in
    /// order, decodes on its own, and the bundle reads every record once (archive + ring).
    func rollBySize(forcePwrite: Bool, compressed: Bool) throws {
        let path = makeTemporaryDirectory(self) + "/size.logbook"
        let rolled = Locked<[ArchivedFile]>([])
        let options = ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil,
                                     compressionLevel: compressed ? 1 : nil, forcePwrite: forcePwrite,
                                     onFileRolled: { file in rolled.withLock { $0.append(file) } })
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000, archive: options)
        XCTAssertEqual(bundle.archiveStats?.backend.rawValue, forcePwrite ? "pwrite" : expectedDefaultBackend)
        let log = try bundle.logger("size")
        let count = 20_000
        for i in 0..<count { log.info("record \(i) of \(count)") }
        try bundle.rollArchive()
        let stats = try XCTUnwrap(bundle.archiveStats)
        try bundle.close()

        let directory = path + "/archive"
        let files = rolled.withLock { $0 }
        XCTAssertGreaterThan(files.count, 5)
        if compressed {
            // All together: the last file rolled can hold a chunk or two, whose fixed frames and
            // zstd's own overhead weigh more than their records.
            let bytes = files.reduce(UInt64(0)) { $0 + $1.bytes }
            let uncompressed = files.reduce(UInt64(0)) { $0 + $1.uncompressedBytes }
            XCTAssertLessThan(bytes * 3, uncompressed, "compressed at least 3x")
        }
        XCTAssertEqual(files.map(\.number), Array(1...UInt64(files.count)))
        XCTAssertEqual(stats.filesRolled, UInt64(files.count))
        XCTAssertEqual(stats.lastError, 0)
        var total = 0
        for file in files {
            XCTAssertTrue(file.path.hasSuffix(compressed ? ".lba.zst" : ".lba"), file.path)
            XCTAssertEqual(file.isCompressed, compressed)
            XCTAssertLessThanOrEqual(file.uncompressedBytes, 64 << 10)
            XCTAssertEqual(UInt64(try size(file.path)), file.bytes)
            // A single file decodes on its own: its meta entries travel with it.
            let reader = try LogReader(path: file.path)
            let entries = try reader.readAll()
            XCTAssertEqual(reader.issues.map(\.description), [])
            XCTAssertTrue(entries.allSatisfy { $0.logger == "size" && $0.message.hasPrefix("record ") })
            total += entries.count
        }
        XCTAssertEqual(total, count, "every record is in exactly one rolled file")
        let (entries, issues) = try readBundle(path)
        XCTAssertEqual(issues.map(\.description), [])
        XCTAssertEqual(entries.map(\.message), (0..<count).map { "record \($0) of \(count)" })
        let (fromDirectory, _) = try readBundle(directory)
        XCTAssertEqual(fromDirectory.count, count)
    }

    func testRollsBySizeWithIoUring() throws { try rollBySize(forcePwrite: false, compressed: true) }
    func testRollsBySizeWithPwriteFallback() throws { try rollBySize(forcePwrite: true, compressed: false) }

    /// Age rolling follows the injected clock.
    func testRollsByAge() throws {
        let path = makeTemporaryDirectory(self) + "/age.logbook"
        let now = Atomic<Int64>(1_000_000_000_000)
        let rolled = Locked<[UInt64]>([])
        let options = ArchiveOptions(rollInterval: .seconds(60), onFileRolled: { file in rolled.withLock { $0.append(file.number) } },
                                     clock: { now.load(ordering: .relaxed) })
        let bundle = try LogBundle(path: path, archive: options)
        let log = try bundle.logger("age")
        log.info("first hour")
        try bundle.syncArchive()
        XCTAssertEqual(rolled.withLock { $0 }, [], "a young file does not roll")
        now.add(61_000_000_000, ordering: .relaxed)
        // The pass that completes the first sync sees the age; the second sync waits for it.
        try bundle.syncArchive()
        try bundle.syncArchive()
        // Announced once compressed, on the compression thread (at idle priority: nearly starved
        // on a busy machine). A roll waits for it, lending it a normal priority; the file being
        // written holds nothing, so the roll completes no file of its own.
        try bundle.rollArchive()
        XCTAssertEqual(rolled.withLock { $0 }, [1])
        log.info("second hour")
        try bundle.syncArchive()
        now.add(30_000_000_000, ordering: .relaxed)
        try bundle.syncArchive()
        try bundle.syncArchive()
        XCTAssertEqual(rolled.withLock { $0 }, [1], "the new file counts its age from its own start")
        try bundle.close()
        XCTAssertEqual(rolled.withLock { $0 }, [1, 2], "a clean close completes the file being written")
        XCTAssertEqual(try archiveNames(path + "/archive"), ["archive-0000000001.lba.zst", "archive-0000000002.lba.zst"])
        XCTAssertEqual(try readBundle(path).entries.map(\.message), ["first hour", "second hour"])
    }

    /// Retention: the oldest complete files go first, by count and by quota; the file being
    /// written is never deleted.
    func testKeepsCountAndQuota() throws {
        let path = makeTemporaryDirectory(self) + "/retention.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: 3, quota: nil))
        let log = try bundle.logger("count")
        for round in 0..<6 {
            for i in 0..<500 { log.info("round \(round) record \(i)") }
            try bundle.rollArchive()
        }
        XCTAssertEqual(bundle.archiveStats?.filesDeleted, 3)
        try bundle.close()
        XCTAssertEqual(try archiveNames(path + "/archive"),
                       ["archive-0000000004.lba.zst", "archive-0000000005.lba.zst", "archive-0000000006.lba.zst"])
        let rounds = Set(try readBundle(path + "/archive").entries.map { $0.message.split(separator: " ")[1] })
        XCTAssertEqual(rounds, ["3", "4", "5"])

        // Quota: files of ~64 KiB under a 200 KiB quota, the current one counted (uncompressed
        // files: see testQuotaCountsCompressedBytes).
        let quotaPath = makeTemporaryDirectory(self) + "/quota.logbook"
        let quota = 200 << 10
        // No idle sealing: the chunks (and so where files roll) are the same on every machine.
        let quotaBundle = try LogBundle(path: quotaPath, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                        idleSealMilliseconds: 0, losslessWaitMilliseconds: 30_000,
                                        archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: quota,
                                                                compressionLevel: nil))
        let quotaLog = try quotaBundle.logger("quota")
        for i in 0..<40_000 {
            quotaLog.info("quota record \(i)")
            if i % 5000 == 4999 {
                try quotaBundle.syncArchive()
                let names = try archiveNames(quotaPath + "/archive")
                let bytes = try names.map { try size(quotaPath + "/archive/" + $0) }.reduce(0, +)
                XCTAssertLessThanOrEqual(bytes, quota, "\(names)")
                XCTAssertEqual(names.filter { $0.hasSuffix(".writing") }.count, 1)
            }
        }
        XCTAssertGreaterThan(quotaBundle.archiveStats?.filesDeleted ?? 0, 0)
        try quotaBundle.close()
        let kept = try readBundle(quotaPath + "/archive")
        XCTAssertEqual(kept.issues.map(\.description), [])
        // What is kept is the newest records, contiguous up to the last one.
        let numbers = kept.entries.map { Int($0.message.split(separator: " ")[2])! }
        XCTAssertEqual(numbers, Array(numbers.first!...39_999))
    }

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

    /// The issue's burst: 2 threads × 1,000,000 messages through a 1 MiB lossless ring; every
    /// record is readable afterwards, once.
    func testLosslessBurstFarLargerThanTheRing() throws {
        let path = makeTemporaryDirectory(self) + "/burst.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 64 << 10, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 60_000,
                                   archive: ArchiveOptions(maxFiles: nil, quota: nil))
        let log = try bundle.logger("burst")
        let perThread = 1_000_000
        DispatchQueue.concurrentPerform(iterations: 2) { t in
            for i in 0..<perThread { log.info("thread \(t) message \(i)") }
        }
        let counters = bundle.counters
        XCTAssertEqual(counters.dropped, 0, "\(counters.drops)")
        XCTAssertGreaterThan(counters.chunksReused, 100, "the ring wrapped many times")
        try bundle.close()

        let reader = try LogReader(path: path)
        var seen = [[Bool]](repeating: [Bool](repeating: false, count: perThread), count: 2)
        var count = 0, duplicates = 0
        try reader.scan { entry in
            count += 1
            guard case .signed(let t, _)? = entry.arguments.first, case .signed(let i, _)? = entry.arguments.last else { return }
            if seen[Int(t)][Int(i)] { duplicates += 1 }
            seen[Int(t)][Int(i)] = true
        }
        XCTAssertEqual(reader.issues.map(\.description), [])
        XCTAssertEqual(count, 2 * perThread)
        XCTAssertEqual(duplicates, 0)
        XCTAssertTrue(seen.allSatisfy { $0.allSatisfy { $0 } })
    }

    /// A clean close completes the file being written (END frame, fsync, rename, onFileRolled),
    /// so that an uploader gets every record of a process that ended cleanly; reopening starts a
    /// new file and reconciles the ring with the files: no record twice, none lost, no issue.
    func testCleanCloseCompletesTheFileAndReopenAddsNoDuplicates() throws {
        let path = makeTemporaryDirectory(self) + "/reopen.logbook"
        let rolled = Locked<[ArchivedFile]>([])
        for session in 0..<3 {
            let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                       losslessWaitMilliseconds: 30_000,
                                       archive: ArchiveOptions(onFileRolled: { file in rolled.withLock { $0.append(file) } }))
            let log = try bundle.logger("reopen")
            for i in 0..<3000 { log.info("session \(session) record \(i)") }
            try bundle.close()
            XCTAssertEqual(rolled.withLock { $0.count }, session + 1, "close announces the file it completed")
        }
        XCTAssertEqual(try archiveNames(path + "/archive"),
                       ["archive-0000000001.lba.zst", "archive-0000000002.lba.zst", "archive-0000000003.lba.zst"])
        XCTAssertEqual(rolled.withLock { $0.map(\.records) }, [3000, 3000, 3000])
        let reader = try LogReader(path: path + "/archive")
        let entries = try reader.readAll()
        XCTAssertEqual(reader.issues.map(\.description), [])
        XCTAssertEqual(entries.count, 9000)
        let bundleReader = try LogReader(path: path)
        XCTAssertEqual(try bundleReader.readAll().count, 9000)
        let summary = try bundleReader.verify()
        XCTAssertEqual(bundleReader.issues.map(\.description), [])
        XCTAssertEqual(summary.recordsExpected, 9000)
        XCTAssertEqual(summary.recordsLost, 0)
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

    /// A custom directory is linked from the bundle, so readers of the bundle find it.
    func testCustomDirectoryIsFoundThroughTheBundle() throws {
        let root = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: root + "/app.logbook", archive: ArchiveOptions(directory: root + "/elsewhere"))
        try bundle.logger("custom").info("kept elsewhere")
        try bundle.rollArchive()
        try bundle.close()
        XCTAssertEqual(try archiveNames(root + "/elsewhere"), ["archive-0000000001.lba.zst"])
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: root + "/app.logbook/archive"),
                       URL(fileURLWithPath: root + "/elsewhere").resolvingSymlinksInPath().path)
        XCTAssertEqual(try readBundle(root + "/elsewhere").entries.map(\.message), ["kept elsewhere"])
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
