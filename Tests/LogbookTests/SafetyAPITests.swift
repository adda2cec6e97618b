import Foundation
import LogbookTestKit
import Logging
import XCTest
@testable import Logbook
import LogbookLogging
import LogbookTesting

/// Issue 11, "safe by default": the API refuses what it cannot do with an error that names what
/// was wrong, and does what its names say.
final class SafetyAPITests: XCTestCase {
    // MARK: A reader opened on something that is not Logbook's

    func assertRefused(_ path: String, errno expected: Int32, _ why: String, line: UInt = #line) {
        XCTAssertThrowsError(try LogReader(path: path), why, line: line) { error in
            guard let error = error as? LogbookError else { return XCTFail("\(error)", line: line) }
            XCTAssertEqual(error.errno, expected, "\(why): \(error)", line: line)
            XCTAssertEqual(error.path, path, line: line)
            XCTAssertTrue(error.description.contains(path), error.description, line: line)
        }
    }

    /// `createParentDirectories` makes the missing directories above the bundle (0700, like it);
    /// without it a missing parent is ENOENT. `permissions: .groupReadable` makes the directory
    /// 0750 and its files 0640, whatever the umask.
    func testParentsAndGroupReadableBundles() throws {
        let base = makeTemporaryDirectory(self)
        let path = base + "/srvapp/logs/app.logbook"
        XCTAssertThrowsError(try LogBundle(path: path, capacity: 1 << 20)) { error in
            XCTAssertEqual((error as? LogbookError)?.errno, ENOENT, "\(error)")
        }
        let saved = umask(0o077)
        defer { umask(saved) }
        let bundle = try LogBundle(path: path, capacity: 1 << 20, createParentDirectories: true, permissions: .groupReadable)
        try bundle.logger("srv").info("up")
        try bundle.close()
        func mode(_ path: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
        }
        XCTAssertEqual(try mode(base + "/srvapp"), 0o750)
        XCTAssertEqual(try mode(base + "/srvapp/logs"), 0o750)
        XCTAssertEqual(try mode(path), 0o750)
        for file in ["ring", "meta", "lock"] { XCTAssertEqual(try mode(path + "/" + file), 0o640, file) }
        let reader = try LogReader(path: path)
        XCTAssertEqual(try reader.readAll().map(\.message), ["up"])
        let privatePath = base + "/private/app.logbook"
        try LogBundle(path: privatePath, capacity: 1 << 20, createParentDirectories: true).close()
        XCTAssertEqual(try mode(base + "/private"), 0o700)
        XCTAssertEqual(try mode(privatePath + "/ring"), 0o600)
    }

    /// The permissions apply at every open for writing, both ways: a bundle opened
    /// `.groupReadable` once and then with the default `.private` is 0700/0600 again, so group
    /// access can be taken back. (The fourth outside test found 0750/0640 left.)
    func testAPrivateOpenTakesGroupAccessBack() throws {
        let path = makeTemporaryDirectory(self) + "/app.logbook"
        let saved = umask(0)
        defer { umask(saved) }
        let shared = try LogBundle(path: path, capacity: 1 << 20, durability: .interval(.seconds(60)),
                                   permissions: .groupReadable)
        try shared.logger("srv").info("shared")
        try shared.close()
        func mode(_ path: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
        }
        let files = ["ring", "meta", "lock", "mirror", "durable"]
        XCTAssertEqual(try mode(path), 0o750)
        for file in files { XCTAssertEqual(try mode(path + "/" + file), 0o640, file) }
        try LogBundle(path: path, capacity: 1 << 20).close()
        XCTAssertEqual(try mode(path), 0o700)
        for file in files { XCTAssertEqual(try mode(path + "/" + file), 0o600, file) }
    }

    func testReaderOnAnythingButABundleOrArchiveThrowsNamingThePath() throws {
        let root = makeTemporaryDirectory(self)
        let empty = root + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        assertRefused(empty, errno: EPROTO, "an empty directory")

        let unrelated = root + "/unrelated"
        try FileManager.default.createDirectory(atPath: unrelated, withIntermediateDirectories: true)
        try Data("hello".utf8).write(to: URL(fileURLWithPath: unrelated + "/notes.txt"))
        try Data("x".utf8).write(to: URL(fileURLWithPath: unrelated + "/archive.lba.bak"))
        assertRefused(unrelated, errno: EPROTO, "a directory of unrelated files")

        let text = root + "/notes.txt"
        try Data("just some text, not a log\n".utf8).write(to: URL(fileURLWithPath: text))
        assertRefused(text, errno: EPROTO, "a text file")
        let noise = root + "/noise.bin"
        try Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 131) }).write(to: URL(fileURLWithPath: noise))
        assertRefused(noise, errno: EPROTO, "a binary file that is no archive file")
        let emptyFile = root + "/empty.lba"
        try Data().write(to: URL(fileURLWithPath: emptyFile))
        assertRefused(emptyFile, errno: EPROTO, "an empty file")
        XCTAssertThrowsError(try LogReader(path: text)) { error in
            XCTAssertTrue("\(error)".contains("neither a Logbook bundle nor an archive directory or file"), "\(error)")
        }

        assertRefused(root + "/does-not-exist", errno: ENOENT, "a path that does not exist")
        assertRefused(root + "/does-not-exist/ring", errno: ENOENT, "below a path that does not exist")
    }

    /// An archive file is read under any name, and one with an archive file's name is read even
    /// when its header is damaged: that is damage to report, not a file to refuse.
    func testArchiveFilesStillOpenRenamedOrDamaged() throws {
        let root = makeTemporaryDirectory(self)
        let path = root + "/a.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 << 10, chunkSize: 4096, wrapPolicy: .lossless,
                                   losslessWaitMilliseconds: 30_000,
                                   archive: ArchiveOptions(maxFileSize: 64 << 10, maxFiles: nil, quota: nil))
        let log = try bundle.logger("archived")
        for i in 0..<2000 { log.info("record \(i)") }
        try bundle.close()
        let archived = path + "/archive/archive-0000000001.lba.zst"

        let renamed = root + "/uploaded-by-the-uploader.bin"
        try FileManager.default.copyItem(atPath: archived, toPath: renamed)
        let reader = try LogReader(path: renamed)
        XCTAssertGreaterThan(try reader.readAll().count, 0)
        XCTAssertEqual(reader.issues.map(\.description), [])

        let damaged = root + "/archive-0000000007.lba"
        try Data(repeating: 0x55, count: 5000).write(to: URL(fileURLWithPath: damaged))
        let damagedReader = try LogReader(path: damaged)
        XCTAssertEqual(try damagedReader.readAll().count, 0)
        XCTAssertFalse(damagedReader.issues.isEmpty, "the damage is reported")
    }

    // MARK: readAll() reads all

    func testReadAllReadsEverythingAgainAndReadNewOnlyWhatCameAfter() throws {
        let path = makeTemporaryDirectory(self) + "/again.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        let log = try bundle.logger("again")
        for i in 0..<5 { log.info("first \(i)") }
        let reader = try LogReader(path: path)
        let first = try reader.readAll()
        XCTAssertEqual(first.map(\.message), (0..<5).map { "first \($0)" })
        let second = try reader.readAll()
        XCTAssertEqual(second.map(\.message), first.map(\.message), "readAll twice returns the same entries")
        XCTAssertEqual(second.map(\.wallNanoseconds), first.map(\.wallNanoseconds))
        XCTAssertEqual(try reader.readNew().count, 0, "nothing new since")

        for i in 0..<3 { log.info("second \(i)") }
        XCTAssertEqual(try reader.readNew().map(\.message), (0..<3).map { "second \($0)" }, "only the new ones")
        XCTAssertEqual(try reader.readAll().map(\.message),
                       (0..<5).map { "first \($0)" } + (0..<3).map { "second \($0)" }, "from the beginning")
        log.info("third")
        XCTAssertEqual(try reader.readNew().map(\.message), ["third"], "readNew after readAll: only the new one")

        // After scan(_:) too, and issues describe the last read (no duplicates from earlier ones).
        var scanned = 0
        try reader.scan { _ in scanned += 1 }
        XCTAssertEqual(scanned, 0)
        XCTAssertEqual(try reader.readAll().count, 9)
        XCTAssertEqual(reader.issues.map(\.description), [])
        try bundle.close()
        let summary = try reader.verify()
        XCTAssertEqual(summary.recordsFound, 9)
    }

    // MARK: Private metadata values

    /// Every file of a bundle (ring, meta, archive files), as bytes.
    func bundleBytes(_ path: String) throws -> [(String, Data)] {
        let files = FileManager.default.enumerator(atPath: path)!.compactMap { $0 as? String }
        return try files.compactMap { name in
            var isDirectory: ObjCBool = false
            FileManager.default.fileExists(atPath: path + "/" + name, isDirectory: &isDirectory)
            return isDirectory.boolValue ? nil : (name, try Data(contentsOf: URL(fileURLWithPath: path + "/" + name)))
        }
    }

    func assertNoFileHolds(_ secret: String, in path: String, line: UInt = #line) throws {
        let files = try bundleBytes(path)
        XCTAssertTrue(files.contains { $0.0 == "ring" }, "\(files.map(\.0))", line: line)
        for (name, bytes) in files {
            XCTAssertNil(bytes.range(of: Data(secret.utf8)), "\(name) holds the secret", line: line)
        }
    }

    /// The reader's form of a withheld value, in text (`user=<private>`) and JSON (null), as
    /// for a message argument logged with `privacy: .private`.
    func assertWithheld(_ entry: LogEntry, _ key: String, as type: LogArgumentType, line: UInt = #line) throws {
        XCTAssertEqual(entry.metadata[key], .value(.redacted(type)), line: line)
        XCTAssertEqual(entry.metadata[key]?.description, "<private>", line: line)
        XCTAssertTrue(entry.textLine().contains(" \(key)=<private>"), entry.textLine(), line: line)
        let json = try JSONSerialization.jsonObject(with: Data(entry.jsonLine().utf8)) as! [String: Any]
        let metadata = try XCTUnwrap(json["metadata"] as? [String: Any], line: line)
        XCTAssertTrue(metadata[key] is NSNull, "\(metadata)", line: line)
    }

    func testNativeMetadataValueMarkedPrivateNeverReachesTheDisk() throws {
        let capture = try LogCapture()
        let log = try capture.logger("auth")
        let user = "alice-SECRET-4711"
        let pin = 987_654_321
        let account = "acct-SECRET-0042"
        log.warning("login failed", metadata: [
            "user": .private(user), "pin": .private(pin), "port": .private(.init(UInt16(8080))),
            "account": "\(account, privacy: .private)", "note": "for \(account, privacy: .private) today",
            "shown": "\(account.count, privacy: .public) chars", "attempt": 3, "visible": "visible-7f3a",
        ])
        let entry = try capture.expect(.warning, logger: "auth", message: "login failed", metadata: ["user": "<private>"])
        try assertWithheld(entry, "user", as: .string)
        try assertWithheld(entry, "pin", as: .int)
        try assertWithheld(entry, "port", as: .uint16)
        try assertWithheld(entry, "account", as: .string)
        try assertWithheld(entry, "note", as: .string)
        XCTAssertEqual(entry.metadata["shown"]?.string, "16 chars")
        XCTAssertEqual(entry.metadata["attempt"], .value(.signed(3, .int)))
        let ring = try Data(contentsOf: URL(fileURLWithPath: capture.path + "/ring"))
        XCTAssertNotNil(ring.range(of: Data("visible-7f3a".utf8)), "a value not withheld is found where the scan looks")
        try assertNoFileHolds(user, in: capture.path)
        try assertNoFileHolds(account, in: capture.path)
        try assertNoFileHolds(String(pin), in: capture.path)
        var pinBytes = Int64(pin)
        let binaryPin = withUnsafeBytes(of: &pinBytes) { Data($0) }
        for (name, bytes) in try bundleBytes(capture.path) {
            XCTAssertNil(bytes.range(of: binaryPin), "\(name) holds the pin in binary")
        }
        if let logbook = logbookExecutable() {
            let text = try runProgram(logbook, ["show", capture.path])
            XCTAssertTrue(text.output.contains("account=<private>"), text.output)
            XCTAssertTrue(text.output.contains("user=<private>"), text.output)
            let json = try runProgram(logbook, ["show", "--json", capture.path])
            XCTAssertTrue(json.output.contains(#""user":null"#), json.output)
        }
    }

    func testPrivateOfAListOrMapIsWithheldAsAString() {
        XCTAssertEqual(LogMetadataValue.private(["a", 1]), .value(.redacted(.string)))
        XCTAssertEqual(LogMetadataValue.private(["k": "v"]), .value(.redacted(.string)))
        XCTAssertEqual(LogMetadataValue.private(true), .value(.redacted(.bool)))
        XCTAssertEqual(LogMetadataValue.private(1.5), .value(.redacted(.double)))
        XCTAssertEqual(LogMetadataValue.private("x"), .value(.redacted(.string)))
        XCTAssertEqual(LogMetadataValue.private([UInt8]([1, 2])), .value(.redacted(.bytes)))
        let interpolated: LogMetadataValue = "/v1/\(42)/\("items")"
        XCTAssertEqual(interpolated.string, "/v1/42/items", "interpolation without privacy is a string, as before")
    }

    func testSwiftLogMetadataValueMarkedPrivateNeverReachesTheDisk() throws {
        let capture = try LogCapture()
        var logger = Logging.Logger(label: "auth") { LogbookLogHandler(label: $0, bundle: capture.bundle) }
        let name = "bob-SECRET-1234"
        let token = "tok-SECRET-5678"
        logger[metadataKey: "session"] = .private(token)
        logger.warning("login failed", metadata: ["user": .private(name), "pin": .private(424_242), "attempt": .stringConvertible(3)])
        let entry = try capture.expect(.warning, logger: "auth", message: "login failed")
        try assertWithheld(entry, "user", as: .string)
        try assertWithheld(entry, "session", as: .string)
        try assertWithheld(entry, "pin", as: .int)
        XCTAssertEqual(entry.metadata["attempt"]?.description, "3")
        try assertNoFileHolds(name, in: capture.path)
        try assertNoFileHolds(token, in: capture.path)

        // Other handlers see only "<private>": the value is not kept.
        let value = Logging.Logger.MetadataValue.private(name)
        XCTAssertEqual(value.description, "<private>")
        XCTAssertFalse(String(reflecting: value).contains(name), String(reflecting: value))
        var dumped = ""
        dump(value, to: &dumped)
        XCTAssertFalse(dumped.contains(name), dumped)
        let wrapped = Logging.Logger.MetadataValue.stringConvertible(7)
        guard case .stringConvertible(let withheld) = Logging.Logger.MetadataValue.private(wrapped) else { return XCTFail() }
        XCTAssertEqual((withheld as? PrivateMetadataValue)?.withheldType, .int, "the type inside is found")
    }

    // MARK: What a test framework shows of a failed expectation

    func testExpectationFailureLocalizedDescriptionListsTheCapturedEntries() throws {
        let capture = try LogCapture()
        let log = try capture.logger("net")
        log.info("connected to \(8080)")
        log.warning("retrying in \(2.5) s")
        do {
            try capture.expect(.error, logger: "net")
            XCTFail("no error entry was logged")
        } catch {
            let shown = (error as Error).localizedDescription
            XCTAssertTrue(shown.contains("expected level error, logger \"net\"; no entry matched. Captured 2:"), shown)
            XCTAssertTrue(shown.contains("info     net: connected to 8080"), shown)
            XCTAssertTrue(shown.contains("warning  net: retrying in 2.5 s"), shown)
            XCTAssertFalse(shown.contains("could not be completed"), shown)
            XCTAssertEqual(shown, "\(error)")
        }
        XCTAssertThrowsError(try capture.expectNone(.warning)) { error in
            XCTAssertTrue(error.localizedDescription.contains("no entry with level warning; 1 entries matched"),
                          error.localizedDescription)
        }
    }

    // MARK: Interpolating a type Logbook cannot store

    /// The compiler's message for an unsupported type says what to write instead, with and
    /// without `privacy:`; every supported type, a conforming type of one's own and
    /// `describing:` still type-check (no ambiguity with the unavailable overloads).
    func testUnsupportedInterpolationPointsAtDescribing() throws {
        let modules = try BuiltModules.find()
        let common = """
            import Logbook
            struct Point { var x = 1, y = 2 }
            struct UserID: LogArgumentConvertible { var rawValue: UInt64; var logArgument: UInt64 { rawValue } }
            let log = try LogBundle(path: "/tmp/unused.logbook").logger("typecheck")

            """
        let unsupported = common + """
            log.info("at \\(Point())")
            log.warning("at \\(Point(), privacy: .private)")
            let maybe: Int? = 3
            log.info("maybe \\(maybe)")
            log.info("maybe \\(Optional("text"))")
            log.info("maybe \\(maybe, privacy: .private)")

            """
        let supported = common + """
            let bytes: [UInt8] = [1, 2]
            let text = "abc"
            log.info("\\(true) \\(Int8(1)) \\(Int16(2)) \\(Int32(3)) \\(Int64(4)) \\(5) \\(UInt8(6)) \\(UInt16(7))")
            log.info("\\(UInt32(8)) \\(UInt64(9)) \\(UInt(10)) \\(Float(1.5)) \\(2.5) \\(text) \\(text.dropFirst()) \\(bytes)")
            log.info("\\(bytes[...]) \\(UserID(rawValue: 7)) \\(UserID(rawValue: 8), privacy: .private) \\(text, privacy: .public)")
            log.info("\\(describing: Point()) \\(describing: Point(), privacy: .private) \\(describing: Optional(3))")
            let maybe: Int? = 3
            log.info("\\(maybe ?? 0) \\(maybe ?? 0, privacy: .private) \\(maybe!)")

            """
        let results = modules.typecheck([unsupported, supported], in: makeTemporaryDirectory(self))
        XCTAssertNotEqual(results[0].status, 0, results[0].output)
        let errors = results[0].output.split(separator: "\n").filter { $0.contains("error:") }
        XCTAssertEqual(errors.count, 5, results[0].output)
        guard errors.count == 5 else { return }
        for error in errors[0..<2] {
            XCTAssertTrue(error.contains("Logbook logs typed values: use \\(describing: value"), String(error))
        }
        XCTAssertTrue(errors[1].contains("privacy: ...)"), String(errors[1]))
        for error in errors[2..<5] {
            // A fallback of the value's type, not `?? 0` (which a String? cannot take).
            XCTAssertTrue(error.contains("unwrap the optional (\\(value ?? fallback"), String(error))
            XCTAssertTrue(error.contains("with a fallback of its type"), String(error))
            XCTAssertTrue(error.contains("or use \\(describing: value"), String(error))
        }
        XCTAssertTrue(errors[4].contains("privacy: ...)"), String(errors[4]))
        XCTAssertEqual(results[1].status, 0, results[1].output)
        XCTAssertFalse(results[1].output.contains("error:"), results[1].output)
    }
}
