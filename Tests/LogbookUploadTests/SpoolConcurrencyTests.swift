import CLogbook
import Foundation
import LogbookTestKit
import XCTest
import Logbook
@testable import LogbookUpload

/// The uploader's spool: durable submission, state replaced atomically, resumption after a crash,
/// one process at a time, damage quarantined.
final class SpoolConcurrencyTests: XCTestCase {
    var clockValue: Int64 = 1_000

    func makeSpool(_ path: String) throws -> Spool {
        try Spool(path: path, clock: { [unowned self] in clockValue })
    }

    func testSubmittedItemsSurviveAReopenWithTheirState() throws {
        let dir = makeTemporaryDirectory(self)
        let source = dir + "/archive-0000000001.lba"
        try Data("file content".utf8).write(to: URL(fileURLWithPath: source))
        var fileItem: SpooledItem
        var dataItem: SpooledItem
        do {
            let spool = try makeSpool(dir + "/spool")
            fileItem = try spool.submit(file: source, linking: true)
            XCTAssertEqual(fileItem.id, SHA256.hex(of: Array("file content".utf8)), "the content's hash by default")
            // A hard link: the archiver's retention can delete its name, not the content.
            let original = try FileManager.default.attributesOfItem(atPath: source)[.systemFileNumber] as? Int
            let spooled = try FileManager.default.attributesOfItem(atPath: spool.dataPath(fileItem.id))[.systemFileNumber] as? Int
            XCTAssertEqual(original, spooled)
            clockValue = 2_000
            dataItem = try spool.submit(data: Array("report".utf8), id: "crash-report-1")
            XCTAssertEqual(try spool.submit(file: source).firstSubmittedNanoseconds, 1_000, "the same content is the same item")
            fileItem.attempts = 3
            fileItem.lastStatus = 503
            fileItem.lastReason = "HTTP 503"
            fileItem.nextAttemptNanoseconds = 9_000
            try spool.update(fileItem)
        }
        try FileManager.default.removeItem(atPath: source)  // retention deleted it: the spool keeps it
        let reopened = try makeSpool(dir + "/spool")
        let contents = try reopened.contents()
        XCTAssertEqual(contents.items, [fileItem, dataItem])
        XCTAssertEqual(contents.quarantined, [])
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: reopened.dataPath(fileItem.id))), Data("file content".utf8))
        try reopened.remove(fileItem.id)
        XCTAssertEqual(try reopened.contents().items, [dataItem])
    }

    func testOneProcessAtATime() throws {
        let path = makeTemporaryDirectory(self) + "/spool"
        let first = try makeSpool(path)
        XCTAssertThrowsError(try makeSpool(path)) { error in
            XCTAssertTrue("\(error)".contains("another process uses this spool"), "\(error)")
        }
        _ = first
    }

    func testWhatACrashLeavesIsRepairedAndDamageIsQuarantined() throws {
        let path = makeTemporaryDirectory(self) + "/spool"
        do {
            let spool = try makeSpool(path)
            try spool.submit(data: Array("a".utf8), id: "a")
            try spool.submit(data: Array("b".utf8), id: "b")
            try spool.submit(data: Array("c".utf8), id: "c")
        }
        // b: content durable, state never written (a kill inside submit, or inside a removal:
        // content goes in first and out last).
        try FileManager.default.removeItem(atPath: path + "/b.state")
        // c: state flipped by one bit.
        var state = try Data(contentsOf: URL(fileURLWithPath: path + "/c.state"))
        state[20] ^= 1
        try state.write(to: URL(fileURLWithPath: path + "/c.state"))
        // d: a state whose content someone deleted (no crash leaves that).
        try FileManager.default.copyItem(atPath: path + "/a.state", toPath: path + "/d.state")
        // A replacement cut short.
        try Data("half".utf8).write(to: URL(fileURLWithPath: path + "/a.state.new"))
        clockValue = 5_000
        let spool = try makeSpool(path)
        let contents = try spool.contents()
        XCTAssertEqual(contents.items.map(\.id), ["a", "b"])
        XCTAssertEqual(contents.items[1].firstSubmittedNanoseconds, 5_000, "recorded when found")
        XCTAssertEqual(contents.quarantined, ["c"])
        XCTAssertEqual(contents.withoutContent.map(\.id), ["d"])
        let left = try FileManager.default.contentsOfDirectory(atPath: path).sorted()
        XCTAssertEqual(left, ["a.data", "a.state", "b.data", "b.state", "lock", "quarantine"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: path + "/quarantine").sorted(), ["c.data", "c.state", "d.state"])
        let again = try spool.contents()
        XCTAssertEqual(again.quarantined + again.withoutContent.map(\.id), [], "reported once")
    }

    /// A submission puts the content in place before the state, and a removal takes the state out
    /// before the content: whatever a kill interrupts, the spool never holds a state without its
    /// content, so that one found so lost its content since (and is reported, not dropped).
    func testAStateIsNeverWithoutItsContent() throws {
        let path = makeTemporaryDirectory(self) + "/spool"
        let spool = try makeSpool(path)
        let source = path + "-source.txt"
        try Data("submitted".utf8).write(to: URL(fileURLWithPath: source))
        // The order is seen by failing each one's second step. A submission whose state cannot be
        // written (a directory planted where its replacement goes) takes its content out again.
        try FileManager.default.createDirectory(atPath: path + "/x.state.new", withIntermediateDirectories: false)
        XCTAssertThrowsError(try spool.submit(file: source, id: "x"), "the state cannot be written")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/x.data"), "content left without its state by a failed submission")
        try FileManager.default.removeItem(atPath: path + "/x.state.new")
        let item = try spool.submit(file: source, id: "x")
        // A removal whose second step fails (the content cannot be unlinked: a directory planted
        // in its place) has taken the state out already.
        try FileManager.default.removeItem(atPath: path + "/x.data")
        try FileManager.default.createDirectory(atPath: path + "/x.data", withIntermediateDirectories: false)
        XCTAssertThrowsError(try spool.remove(item.id))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/x.state"), "a state left without its content by a failed removal")
    }

    func testIdentifiersCannotEscapeTheSpool() throws {
        let spool = try makeSpool(makeTemporaryDirectory(self) + "/spool")
        for bad in ["", "../x", "a/b", ".hidden", String(repeating: "x", count: 129), "a b", "é"] {
            XCTAssertThrowsError(try spool.submit(data: [1], id: bad), bad) { error in
                XCTAssertEqual((error as? LogbookError)?.errno, EINVAL)
            }
        }
    }

    func testStateRecordRoundTripsAndRefusesAnythingElse() {
        let item = SpooledItem(id: "x", byteCount: 12, source: "/var/log/app/archive/archive-0000000001.lba",
                               attempts: 7, firstSubmittedNanoseconds: -5, nextAttemptNanoseconds: .max,
                               lastStatus: -1, lastReason: "connection reset by peer")
        let bytes = SpoolStateRecord.encode(item)
        XCTAssertEqual(SpoolStateRecord.decode(bytes, id: "x", byteCount: 12), item)
        // The size submitted is the record's (version 2 and later), not the content's now.
        XCTAssertEqual(SpoolStateRecord.decode(bytes, id: "x", byteCount: 5)?.byteCount, 12)
        func sealed(_ record: [UInt8], version: UInt8) -> [UInt8] {
            var record = record
            record.replaceSubrange(8..<12, with: [version, 0, 0, 0])
            let crc = record.withUnsafeBytes { lb_crc32c(0, $0.baseAddress, $0.count) }
            withUnsafeBytes(of: crc.littleEndian) { record += $0 }
            return record
        }
        // A version 2 record (no resumption URL: the strings at 48) and a version 1 record (no
        // size: the strings at 40) are still read, the content's size standing in for the latter.
        XCTAssertEqual(SpoolStateRecord.decode(sealed(Array(bytes[0..<48]) + Array(bytes[64..<(bytes.count - 4)]), version: 2),
                                               id: "x", byteCount: 12), item)
        XCTAssertEqual(SpoolStateRecord.decode(sealed(Array(bytes[0..<40]) + Array(bytes[64..<(bytes.count - 4)]), version: 1),
                                               id: "x", byteCount: 12), item)
        // Version 3 keeps where a resumable upload resumes, how far it came, and the attempts it moved forward.
        var resumable = item
        resumable.resumptionURL = "http://127.0.0.1:8080/resumable_upload/abc?token=1"
        resumable.resumedOffset = 5_000_000_000
        resumable.progressedAttempts = 3
        let resumableBytes = SpoolStateRecord.encode(resumable)
        XCTAssertEqual(SpoolStateRecord.decode(resumableBytes, id: "x", byteCount: 12), resumable)
        for cut in 0..<resumableBytes.count {
            XCTAssertNil(SpoolStateRecord.decode(Array(resumableBytes[0..<cut]), id: "x", byteCount: 12), "cut at \(cut)")
        }
        for cut in 0..<bytes.count {
            XCTAssertNil(SpoolStateRecord.decode(Array(bytes[0..<cut]), id: "x", byteCount: 12), "cut at \(cut)")
        }
        for index in 0..<bytes.count {
            var flipped = bytes
            flipped[index] ^= 0x10
            XCTAssertNil(SpoolStateRecord.decode(flipped, id: "x", byteCount: 12), "byte \(index) flipped")
        }
        var long = item
        long.lastReason = String(repeating: "r", count: 5000)
        XCTAssertEqual(SpoolStateRecord.decode(SpoolStateRecord.encode(long), id: "x", byteCount: 12)?.lastReason.count, 1024)
        // Cut to whole characters: 1023 ASCII bytes and a two-byte "é" do not fit in 1024.
        long.lastReason = String(repeating: "r", count: 1023) + "é"
        XCTAssertEqual(SpoolStateRecord.decode(SpoolStateRecord.encode(long), id: "x", byteCount: 12)?.lastReason.count, 1023)
    }
}
