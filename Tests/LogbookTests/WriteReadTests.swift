import CLogbook
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

struct UserID: LogArgumentConvertible {
    var raw: UInt64
    var logArgument: UInt64 { raw }
}

final class WriteReadTests: XCTestCase {
    func testEveryArgumentTypeRoundTripsWithItsType() throws {
        let path = makeTemporaryDirectory(self) + "/types.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let log = try bundle.logger("types")
        let bytes: [UInt8] = [0, 1, 0xFE]
        log.info("b=\(true) i8=\(Int8(-8)) i16=\(Int16(-16)) i32=\(Int32(-32)) i64=\(Int64(-64)) int=\(-1)")
        log.info("u8=\(UInt8(8)) u16=\(UInt16(16)) u32=\(UInt32(32)) u64=\(UInt64.max) uint=\(UInt(7))")
        log.info("f=\(Float(1.5)) d=\(0.1) s=\("héllo") ss=\("static" as StaticString) raw=\(bytes)")
        log.info("user \(UserID(raw: 42)) sub \("abcdef".dropFirst(3))")
        try bundle.close()

        let (entries, issues) = try readBundle(path)
        XCTAssertEqual(issues.count, 0, "\(issues)")
        XCTAssertEqual(entries.count, 4)
        XCTAssertEqual(entries[0].message, "b=true i8=-8 i16=-16 i32=-32 i64=-64 int=-1")
        XCTAssertEqual(entries[0].arguments.map(\.type), [.bool, .int8, .int16, .int32, .int64, .int])
        XCTAssertEqual(entries[1].message, "u8=8 u16=16 u32=32 u64=18446744073709551615 uint=7")
        XCTAssertEqual(entries[1].arguments.map(\.type), [.uint8, .uint16, .uint32, .uint64, .uint])
        XCTAssertEqual(entries[2].message, "f=1.5 d=0.1 s=héllo ss=static raw=<0001fe>")
        XCTAssertEqual(entries[2].arguments, [.float(1.5), .double(0.1), .string("héllo", isStatic: false),
                                              .string("static", isStatic: true), .bytes([0, 1, 0xFE])])
        XCTAssertEqual(entries[3].message, "user 42 sub def")
        XCTAssertEqual(entries[3].logger, "types")
        XCTAssertEqual(entries[3].level, .info)
        XCTAssertEqual(entries[3].file, "LogbookTests/WriteReadTests.swift")
        XCTAssertEqual(entries[3].function, "testEveryArgumentTypeRoundTripsWithItsType()")
        XCTAssertEqual(entries[3].processID, UInt32(getpid()))
    }

    func testPrivateArgumentNeverReachesTheDisk() throws {
        let path = makeTemporaryDirectory(self) + "/private.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let log = try bundle.logger("auth")
        let secret = "hunter2-" + String(UInt64.random(in: 1...UInt64.max))
        log.notice("login for \(secret, privacy: .private) from \(secret.count, privacy: .public)")
        try bundle.close()
        for file in ["ring", "meta"] {
            let data = try Data(contentsOf: URL(fileURLWithPath: path + "/" + file))
            XCTAssertNil(data.range(of: Data(secret.utf8)), "secret found in \(file)")
        }
        let (entries, _) = try readBundle(path)
        XCTAssertEqual(entries.map(\.message), ["login for <private> from \(secret.count)"])
        XCTAssertEqual(entries[0].arguments[0], .redacted(.string))
    }

    func testDisabledCallsDoNotEvaluateTheirMessage() throws {
        let path = makeTemporaryDirectory(self) + "/levels.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let log = try bundle.logger("levels")
        var evaluations = 0
        func counted() -> Int {
            evaluations += 1
            return evaluations
        }
        log.minimumLevel = .warning
        log.info("skipped \(counted())")
        log.debug("skipped \(counted())")
        XCTAssertEqual(evaluations, 0)
        log.warning("kept \(counted())")
        XCTAssertEqual(evaluations, 1)
        log.isEnabled = false
        log.critical("off \(counted())")
        XCTAssertEqual(evaluations, 1)
        XCTAssertNil(log.minimumLevel)
        // Another copy of the logger shares the control.
        let again = try bundle.logger("levels")
        again.minimumLevel = .trace
        log.trace("back on \(counted())")
        XCTAssertEqual(evaluations, 2)
        try bundle.close()
        XCTAssertEqual(try readBundle(path).entries.map(\.message), ["kept 1", "back on 2"])
    }

    func testLevelChangesFromAnotherThreadTakeEffect() throws {
        let path = makeTemporaryDirectory(self) + "/threads.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let log = try bundle.logger("x")
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            log.minimumLevel = .error
            done.signal()
        }
        done.wait()
        XCTAssertFalse(log.isEnabled(.warning))
        XCTAssertTrue(log.isEnabled(.error))
    }

    func testCallSiteIsRegisteredOncePerBundle() throws {
        let path = makeTemporaryDirectory(self) + "/sites.logbook"
        let bundle = try LogBundle(path: path, capacity: 4 << 20, chunkSize: 16 << 10)
        let log = try bundle.logger("sites")
        log.info("warm up \(0)")
        let metaSize = try FileManager.default.attributesOfItem(atPath: path + "/meta")[.size] as! Int
        for i in 0..<1000 { log.info("one site \(i) {braces} {{ }") }
        let afterOneSite = try FileManager.default.attributesOfItem(atPath: path + "/meta")[.size] as! Int
        for i in 0..<1000 { log.info("one site \(i) {braces} {{ }") }
        let afterRepeat = try FileManager.default.attributesOfItem(atPath: path + "/meta")[.size] as! Int
        XCTAssertGreaterThan(afterOneSite, metaSize)  // one SITE entry for the loop's call site
        XCTAssertEqual(afterRepeat, afterOneSite + (afterOneSite - metaSize))  // and one for the second loop
        try bundle.close()
        let entries = try readBundle(path).entries
        XCTAssertEqual(entries.count, 2001)
        XCTAssertEqual(entries[1].message, "one site 0 {braces} {{ }")
        XCTAssertEqual(entries[1].template, "one site {} {{braces} {{{{ }")
    }

    func testSecondWriterGetsAClearError() throws {
        let path = makeTemporaryDirectory(self) + "/locked.logbook"
        let first = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        XCTAssertThrowsError(try LogBundle(path: path)) { error in
            let error = error as! LogbookError
            XCTAssertTrue(error.isLockedByAnotherWriter)
            XCTAssertTrue(error.description.contains("another process is writing"), error.description)
            XCTAssertTrue(error.description.contains(path))
        }
        try first.close()
        let second = try LogBundle(path: path)  // the lock is released by close
        try second.close()
    }

    func testReopenedBundleKeepsOldRecordsAndAddsNewOnes() throws {
        let path = makeTemporaryDirectory(self) + "/reopen.logbook"
        do {
            let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
            try bundle.logger("a").info("first session \(1)")
            try bundle.close()
        }
        do {
            // Geometry options are ignored for an existing bundle.
            let bundle = try LogBundle(path: path, capacity: 64 << 20, chunkSize: 4 << 10)
            try bundle.logger("b").info("second session \(2)")
            try bundle.logger("a").warning("a again \(3)")
            try bundle.close()
        }
        let reader = try LogReader(path: path)
        let entries = try reader.readAll()
        XCTAssertEqual(entries.map(\.message), ["first session 1", "second session 2", "a again 3"])
        XCTAssertEqual(entries.map(\.logger), ["a", "b", "a"])
        let info = try reader.info()
        XCTAssertEqual(info.chunkSize, 16 << 10)
        XCTAssertEqual(info.sessions.count, 2)
        XCTAssertEqual(reader.issues.count, 0)
    }

    func testOpenRejectsBadOptionsAndForeignFiles() throws {
        let dir = makeTemporaryDirectory(self)
        XCTAssertThrowsError(try LogBundle(path: dir + "/a.logbook", capacity: 1 << 20, chunkSize: 5000)) { error in
            XCTAssertEqual((error as! LogbookError).errno, EINVAL)
        }
        try FileManager.default.createDirectory(atPath: dir + "/b.logbook", withIntermediateDirectories: true)
        try Data(repeating: 7, count: 8192).write(to: URL(fileURLWithPath: dir + "/b.logbook/ring"))
        try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: dir + "/b.logbook/meta"))
        XCTAssertThrowsError(try LogBundle(path: dir + "/b.logbook")) { error in
            XCTAssertEqual((error as! LogbookError).errno, EPROTO)
        }
    }

    func testBundleFilesAreCreatedPrivate() throws {
        let path = makeTemporaryDirectory(self) + "/mode.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        defer { try? bundle.close() }
        for file in ["", "/ring", "/meta", "/lock"] {
            let mode = try FileManager.default.attributesOfItem(atPath: path + file)[.posixPermissions] as! Int
            XCTAssertEqual(mode & 0o077, 0, "\(file) is readable by others: \(String(mode, radix: 8))")
        }
    }
}
