import CLogbook
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

final class CorruptionTests: XCTestCase {
    /// A bundle with some of everything: several threads, a fragmented record, several sites, a
    /// ring that wrapped. The threads take turns of 100 records (their chunks interleave, in the
    /// same way on every machine and every run), so that the seeded damage below meets the same
    /// bytes each time.
    func makeSampleBundle(_ path: String) throws {
        let bundle = try LogBundle(path: path, capacity: 256 << 10, chunkSize: 8 << 10, idleSealMilliseconds: 0)
        let log = try bundle.logger("sample")
        // Threads of their own: a queue may run the three on fewer threads, one after another.
        let turns = (0..<3).map { DispatchSemaphore(value: $0 == 0 ? 1 : 0) }
        let done = DispatchGroup()
        for thread in 0..<3 {
            done.enter()
            Thread.detachNewThread {
                for i in 0..<1500 {
                    if i % 100 == 0 { turns[thread].wait() }
                    log.info("thread \(thread) i \(i) s \(String(repeating: "q", count: i % 30))")
                    if i % 500 == 0 { log.warning("large \(String(repeating: "L", count: 20_000))") }
                    if i % 100 == 99 { turns[(thread + 1) % 3].signal() }
                }
                done.leave()
            }
        }
        done.wait()
        try bundle.close()
    }

    func testTruncatedRingGivesIssuesNotACrash() throws {
        let dir = makeTemporaryDirectory(self)
        let original = dir + "/orig.logbook"
        try makeSampleBundle(original)
        let ring = try Data(contentsOf: URL(fileURLWithPath: original + "/ring"))
        let meta = try Data(contentsOf: URL(fileURLWithPath: original + "/meta"))
        for cut in [0, 100, 4096, 4096 + 64, 4096 + 8192 + 333, ring.count / 2, ring.count - 1] {
            let path = dir + "/cut\(cut).logbook"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            try ring.prefix(cut).write(to: URL(fileURLWithPath: path + "/ring"))
            try meta.write(to: URL(fileURLWithPath: path + "/meta"))
            let reader = try LogReader(path: path)
            if cut < 4096 {
                XCTAssertThrowsError(try reader.readAll(), "cut \(cut)")
            } else {
                _ = try reader.readAll()
            }
            XCTAssertTrue(reader.issues.contains { $0.kind == .truncated }, "cut \(cut): \(reader.issues)")
        }
        for cut in [0, 10, 16, 30, meta.count - 1] {
            let path = dir + "/metacut\(cut).logbook"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            try ring.write(to: URL(fileURLWithPath: path + "/ring"))
            try meta.prefix(cut).write(to: URL(fileURLWithPath: path + "/meta"))
            let reader = try LogReader(path: path)
            _ = try reader.readAll()
            XCTAssertFalse(reader.issues.isEmpty, "meta cut \(cut)")
        }
    }

    func testRandomCorruptionNeverCrashesTheReader() throws {
        let dir = makeTemporaryDirectory(self)
        let original = dir + "/orig.logbook"
        try makeSampleBundle(original)
        let ring = try Data(contentsOf: URL(fileURLWithPath: original + "/ring"))
        let meta = try Data(contentsOf: URL(fileURLWithPath: original + "/meta"))
        let cleanCount = try readBundle(original).entries.count
        var generator = SplitMix64(state: 7)
        let path = dir + "/damaged.logbook"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var detected = 0
        for round in 0..<150 {
            var damagedRing = [UInt8](ring), damagedMeta = [UInt8](meta)
            let flips = Int.random(in: 1...40, using: &generator)
            for _ in 0..<flips {
                if Int.random(in: 0..<10, using: &generator) == 0 {
                    damagedMeta[Int.random(in: 0..<damagedMeta.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                } else {
                    // Headers matter most: aim half the flips at the first bytes of chunks.
                    let chunk = Int.random(in: 0..<32, using: &generator)
                    let offset = Bool.random(using: &generator)
                        ? 4096 + chunk * 8192 + Int.random(in: 0..<200, using: &generator)
                        : Int.random(in: 0..<damagedRing.count, using: &generator)
                    damagedRing[offset] = UInt8.random(in: 0...255, using: &generator)
                }
            }
            try Data(damagedRing).write(to: URL(fileURLWithPath: path + "/ring"))
            try Data(damagedMeta).write(to: URL(fileURLWithPath: path + "/meta"))
            let reader = try LogReader(path: path)
            if let entries = try? reader.readAll() {
                XCTAssertLessThanOrEqual(entries.count, cleanCount + 10, "round \(round)")
                for entry in entries { _ = entry.message }  // rendering must not trap either
            }
            if !reader.issues.isEmpty { detected += 1 }
        }
        XCTAssertGreaterThan(detected, 100, "most damage should be reported")
    }

    func testGarbageFilesAreRejectedWithIssues() throws {
        let path = makeTemporaryDirectory(self) + "/garbage.logbook"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var generator = SplitMix64(state: 99)
        for size in [0, 1, 4095, 4096, 65536] {
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
            try Data(bytes).write(to: URL(fileURLWithPath: path + "/ring"))
            try Data(bytes.reversed()).write(to: URL(fileURLWithPath: path + "/meta"))
            let reader = try LogReader(path: path)
            XCTAssertThrowsError(try reader.readAll())
            XCTAssertFalse(reader.issues.isEmpty)
        }
        XCTAssertThrowsError(try LogReader(path: path + "/missing"))
    }

    func testVerifyNamesTheOffsetOfADamagedRecord() throws {
        let path = makeTemporaryDirectory(self) + "/one.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096)
        let log = try bundle.logger("one")
        for i in 0..<20 { log.info("record \(i)") }
        try bundle.close()
        // The 6th record: find its chunk slot and offset from a clean read.
        let sixth = try readBundle(path).entries[5]
        let recordOffset = 4096 + (sixth.chunkSequence % 16) * 4096 + UInt64(sixth.chunkOffset)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path + "/ring"))
        try handle.seek(toOffset: recordOffset + 3)
        handle.write(Data([UInt8(LB_RECORD_FULL.rawValue)]))  // its kind, with the check (bits 28-31) cleared
        try handle.close()
        let reader = try LogReader(path: path)
        let entries = try reader.readAll()
        XCTAssertEqual(entries.count, 5)
        XCTAssertEqual(reader.issues.count, 1)
        XCTAssertEqual(reader.issues.first?.kind, .corrupt)
        XCTAssertEqual(reader.issues.first?.offset, recordOffset)
    }

    /// A kill during a meta append leaves a torn entry at the end. Readers report it as torn (not a
    /// failure); the next writer cuts it before appending, so its new sites stay readable.
    func testTornMetaTailIsReportedThenCutByTheNextWriter() throws {
        let path = makeTemporaryDirectory(self) + "/torn.logbook"
        do {
            let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096)
            try bundle.logger("first").info("before the crash \(1)")
            try bundle.close()
        }
        // Half an entry: a head announcing 100 bytes, and only 10 of them.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path + "/meta"))
        try handle.seekToEnd()
        var head = [UInt8](repeating: 0, count: 12)
        head[0] = 100
        head[8] = 3
        handle.write(Data(head + [UInt8](repeating: 7, count: 10)))
        try handle.close()

        let torn = try LogReader(path: path)
        XCTAssertEqual(try torn.readAll().map(\.message), ["before the crash 1"])
        XCTAssertEqual(torn.issues.map(\.kind), [.torn])
        XCTAssertFalse(torn.issues[0].isFailure)

        let bundle = try LogBundle(path: path)
        try bundle.logger("second").info("after the crash \(2)")
        try bundle.close()
        let (entries, issues) = try readBundle(path)
        XCTAssertEqual(issues.count, 0, "\(issues)")
        XCTAssertEqual(entries.map(\.message), ["before the crash 1", "after the crash 2"])
    }
}
