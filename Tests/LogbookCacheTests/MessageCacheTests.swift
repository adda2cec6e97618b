import CLogbook
import Foundation
import LogbookTestKit
import XCTest
import Logbook
import LogbookCache

/// The Swift message cache: the reference's surface (append, messages, isEmpty, overwrite and
/// reject, too large, order, reopen), raw bytes and the consumer cursor, threads, limits and their
/// counters, damage reported and recovered, a full disk, the compact binary encoding.
/// Those of its tests that CI also runs under ThreadSanitizer are in `MessageCacheConcurrencyTests`.
final class MessageCacheTests: XCTestCase {
    struct Event: Codable, Equatable {
        var name: String
        var number: Int
    }

    /// The outside test's case: reads of a 1 MiB cache while a writer wraps it came back empty or
    /// short, with no issue. Now `messages()` returns consecutive messages up to at least the
    /// newest published when it began, from one copy, and a slow consumer of a cache read in
    /// several copies (a cache larger than 4 MiB, or a smaller `copyLimit`) is told exactly which
    /// sequences the writer overwrote before it got to them. Bounded by reads, not time: the
    /// writer runs until the readers are done.
    func testReadsWhileTheWriterWrapsAreWholeOrSayWhatTheyMissed() throws {
        let dir = makeTemporaryDirectory(self)
        for (name, bytes) in [("whole", 256 << 10), ("in copies", 64 << 10)] {
            let cache = try MessageCache<Event>(file: dir + "/\(name).cache", maximumBytes: bytes)
            var number = 0
            while cache.statistics.evictedToMakeRoom == 0 {
                try cache.append(message: Event(name: "e", number: number))
                number += 1
            }
            let full = cache.count, start = number
            let done = ManagedAtomicFlag()
            let writer = Thread {
                var next = start
                while !done.isSet {
                    for _ in 0..<64 {
                        try! cache.append(message: Event(name: "e", number: next))
                        next += 1
                    }
                }
            }
            writer.start()
            defer { done.set() }
            if name == "whole" {
                for _ in 0..<20 {
                    // the newest published before the read: the read reaches it (the writer
                    // publishes in number order, and one append may be under way)
                    let published = Int(cache.statistics.nextSequence) - 2
                    let numbers = try cache.messages().map(\.number)
                    XCTAssertFalse(numbers.isEmpty)
                    XCTAssertEqual(numbers, Array(numbers.first!..<(numbers.first! + numbers.count)), "consecutive")
                    XCTAssertGreaterThanOrEqual(numbers.last!, published, "reaches what was published when it began")
                    XCTAssertLessThanOrEqual(numbers.count, full + 16, "one moment's messages, no more")
                }
            } else {
                var overtaken = 0
                for _ in 0..<3 {
                    // copies of 4 KiB (as a cache larger than 4 MiB is read by default)
                    let reader = try CacheReader(file: cache.path, encoding: MessageEncoding<Event>.json, copyLimit: 4096)
                    var previous: (sequence: UInt64, number: Int)?
                    var missed: UInt64 = 0, returned: UInt64 = 0, first: UInt64 = 0
                    while let (sequence, event) = try reader.nextMessage() {
                        if let previous {
                            // the sequence and the message's own number move together
                            XCTAssertEqual(UInt64(event.number - previous.number), sequence - previous.sequence)
                        } else {
                            first = sequence
                        }
                        previous = (sequence, event.number)
                        returned += 1
                        _ = try JSONEncoder().encode(event) // a consumer slower than the writer
                    }
                    for issue in reader.issues {
                        let range = try XCTUnwrap(issue.missedSequences, "only missed messages: \(issue)")
                        missed += UInt64(range.count)
                    }
                    let lowest = min(first, reader.issues.first?.missedSequences?.lowerBound ?? first)
                    XCTAssertEqual(returned + missed, previous!.sequence - lowest + 1, "every gap named, exactly")
                    overtaken += reader.issues.isEmpty ? 0 : 1
                }
                print("\(name): \(overtaken) of 3 slow reads were overtaken and said which messages they missed")
            }
            done.set()
            while !writer.isFinished { Thread.sleep(forTimeInterval: 0.001) }
        }
    }

    func testErrorsSayWhatWasWrong() throws {
        let dir = makeTemporaryDirectory(self)
        let first = try MessageCache<Event>(file: dir + "/one.cache", maximumBytes: 16 << 10)
        XCTAssertThrowsError(try MessageCache<Event>(file: dir + "/one.cache", maximumBytes: 16 << 10)) { error in
            XCTAssertTrue("\(error)".contains("another process writes to the cache"), "\(error)")
        }
        XCTAssertThrowsError(try MessageCache<Event>(file: dir + "/small.cache", maximumBytes: 100)) { error in
            XCTAssertTrue("\(error)".contains("under the minimum of 8192"), "\(error)")
        }
        // Found by an outside tester: -1 was reported as "maximum bytes 0 is under the minimum".
        XCTAssertThrowsError(try MessageCache<Event>(file: dir + "/negative.cache", maximumBytes: -1)) { error in
            XCTAssertTrue("\(error)".contains("maximumBytes -1 is negative"), "\(error)")
        }
        try Data(repeating: 7, count: 16 << 10).write(to: URL(fileURLWithPath: dir + "/garbage.cache"))
        XCTAssertThrowsError(try MessageCache<Event>(file: dir + "/garbage.cache", maximumBytes: 16 << 10)) { error in
            XCTAssertTrue("\(error)".contains("is not a Logbook cache"), "\(error)")
        }
        // a symlink in the cache's place is not followed, and the error names it once
        try FileManager.default.createSymbolicLink(atPath: dir + "/link.cache", withDestinationPath: dir + "/one.cache")
        XCTAssertThrowsError(try MessageCache<Event>(file: dir + "/link.cache", maximumBytes: 16 << 10)) { error in
            XCTAssertEqual((error as? LogbookError)?.errno, ELOOP)
            XCTAssertFalse("\(error)".contains("link.cache/link.cache"), "\(error)")
        }
        // limits: nil is no limit; zero or negative is a mistake, said so; a huge age is no limit
        XCTAssertThrowsError(try MessageCache<Event>(file: dir + "/limits.cache", maximumBytes: 16 << 10, maximumCount: 0))
        XCTAssertThrowsError(try MessageCache<Event>(file: dir + "/limits.cache", maximumBytes: 16 << 10, maximumAge: .seconds(-5)))
        let forever = try MessageCache<Event>(file: dir + "/forever.cache", maximumBytes: 16 << 10, maximumAge: .seconds(Int64.max))
        for number in 0..<3 { try forever.append(message: Event(name: "kept", number: number)) }
        XCTAssertEqual(forever.count, 3)
        XCTAssertEqual(forever.statistics.evictedByAge, 0)
        _ = first
    }

    func testAFullCacheThatDoesNotOverwriteRefuses() throws {
        let cache = try MessageCache<Event>(file: makeTemporaryDirectory(self) + "/reject.cache", maximumBytes: 8192,
                                            shouldOverwriteOldMessages: false)
        var appended = 0
        XCTAssertThrowsError(try {
            while true {
                try cache.append(message: Event(name: "x", number: appended))
                appended += 1
            }
        }()) { error in XCTAssertEqual((error as? LogbookError)?.errno, ENOSPC) }
        XCTAssertEqual(try cache.messages().map(\.number), Array(0..<appended))
    }

    func testADamagedMessageIsSkippedAndReportedWithItsOffset() throws {
        let file = makeTemporaryDirectory(self) + "/damaged.cache"
        do {
            let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
            for number in 0..<50 { try cache.append(message: Event(name: "event \(number)", number: number)) }
        }
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
        try handle.seek(toOffset: 4096 + 1000)
        try handle.write(contentsOf: Data("XXXX".utf8))
        try handle.close()
        let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
        let reader = try cache.reader()
        var numbers: [Int] = []
        while let (_, event) = try reader.nextMessage() { numbers.append(event.number) }
        XCTAssertEqual(numbers.count, 49, "one message lost to the damage, the rest read back")
        XCTAssertEqual(Set(numbers).count, 49)
        XCTAssertEqual(reader.issues.count, 1)
        let issue = try XCTUnwrap(reader.issues.first)
        XCTAssertTrue((4096...(4096 + 1000)).contains(Int(issue.offset)), "\(issue)")
        XCTAssertTrue(issue.what.contains("checksum"), "\(issue)")
        try cache.append(message: Event(name: "after", number: 50))
        XCTAssertEqual(try cache.messages().last?.number, 50)
    }

    func testADamagedHeaderIsRebuiltNotRefused() throws {
        let file = makeTemporaryDirectory(self) + "/header.cache"
        do {
            let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
            for number in 0..<30 { try cache.append(message: Event(name: "event", number: number)) }
        }
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
        try handle.seek(toOffset: 16)  // the region size: the header's checksum fails
        try handle.write(contentsOf: Data([0xff]))
        try handle.close()
        let reader = try CacheReader<Event>(file: file, encoding: .json)
        var count = 0
        while try reader.next() != nil { count += 1 }
        XCTAssertEqual(count, 30)
        XCTAssertEqual(reader.issues.first?.offset, 0, "the header is reported")
        let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
        XCTAssertEqual(cache.statistics.rebuilds, 1)
        XCTAssertEqual(try cache.messages().map(\.number), Array(0..<30))
        try cache.append(message: Event(name: "event", number: 30))
        XCTAssertEqual(cache.statistics.nextSequence, 31, "the sequence goes on")
    }

    /// Changes the fixed part of a cache file's header and makes its checksum (bytes 60-63, over
    /// 0-59) match again, as a crafted file would; returns the file's new bytes.
    @discardableResult
    private func rewriteFixedHeader(of file: String, _ edit: (UnsafeMutableRawBufferPointer) -> Void) throws -> Data {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        bytes.withUnsafeMutableBytes { raw in
            edit(raw)
            raw.storeBytes(of: lb_crc32c(0, raw.baseAddress!, 60), toByteOffset: 60, as: UInt32.self)
        }
        try bytes.write(to: URL(fileURLWithPath: file))
        return bytes
    }

    /// Found by an outside tester: after 50 appends (sequences 0-49), a cache cut to 6,000 bytes or
    /// with its region's tail zeroed was rebuilt and the next append got sequence 14; a consumer
    /// removing through a remembered sequence would then delete messages it never saw. The old
    /// header's next sequence is a high-water mark the rebuild keeps.
    func testARebuildNeverGivesASequenceTwice() throws {
        for damage in ["cut", "zeroed tail"] {
            let file = makeTemporaryDirectory(self) + "/sequence.cache"
            do {
                let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
                for number in 0..<50 {
                    XCTAssertEqual(try cache.append(bytes: Array("event \(number)".utf8)), UInt64(number))
                }
            }
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
            if damage == "cut" {
                try handle.truncate(atOffset: 6000)
            } else {
                try handle.seek(toOffset: 4096 + 700)
                handle.write(Data(count: 8 << 10))
            }
            try handle.close()
            let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
            XCTAssertEqual(cache.statistics.rebuilds, 1, damage)
            XCTAssertEqual(try cache.append(bytes: Array("after".utf8)), 50, "\(damage): never a number given before")
        }
    }

    /// Found by the fourth outside test: after a rebuild, `rebuilds` and `damageFound` kept random
    /// 64-bit values (17209541751804380807) written into a header whose fixed part was sound but
    /// whose moving fields disagreed. They are moving fields too: a rebuild for damage starts them
    /// from 0 and counts itself. A sound header's counter flipped high reads as `Int.max`, never
    /// a trap.
    func testARebuildStartsTheDamageCountersFromZero() throws {
        let file = makeTemporaryDirectory(self) + "/counters.cache"
        do {
            let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
            for number in 0..<20 { try cache.append(message: Event(name: "event", number: number)) }
        }
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
        for offset: UInt64 in [152, 160] {  // rebuilds, damage_found (docs/FORMAT.md, "Cache")
            try handle.seek(toOffset: offset)
            try handle.write(contentsOf: withUnsafeBytes(of: UInt64(17_209_541_751_804_380_807)) { Data($0) })
        }
        try handle.seek(toOffset: 72)  // tail, out of bounds: the moving fields disagree
        try handle.write(contentsOf: withUnsafeBytes(of: UInt64.max / 2) { Data($0) })
        try handle.close()
        let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
        XCTAssertEqual(cache.statistics.rebuilds, 1)
        XCTAssertTrue((1...2).contains(cache.statistics.damageFound), "\(cache.statistics.damageFound)")
        XCTAssertEqual(try cache.messages().map(\.number), Array(0..<20))
    }

    /// Found by an outside tester: a header whose region size was set to 8 (or 4,096) with its
    /// checksum recomputed made readers find 0 (or 20) of 50 messages, and the writer's rebuild
    /// deleted the rest for good. A region smaller than the file is damage: the region is scanned.
    func testACraftedRegionSizeLosesNoMessage() throws {
        for crafted in [UInt64(8), 4096] {
            let file = makeTemporaryDirectory(self) + "/region.cache"
            do {
                let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
                for number in 0..<50 { try cache.append(message: Event(name: "event", number: number)) }
            }
            try rewriteFixedHeader(of: file) { $0.storeBytes(of: crafted, toByteOffset: 16, as: UInt64.self) }  // region_size
            let reader = try CacheReader<Event>(file: file, encoding: .json)
            var count = 0
            while try reader.next() != nil { count += 1 }
            XCTAssertEqual(count, 50, "region \(crafted)")
            XCTAssertFalse(reader.issues.isEmpty, "the damage is reported")
            let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
            XCTAssertEqual(try cache.messages().map(\.number), Array(0..<50), "region \(crafted)")
            XCTAssertEqual(try cache.append(bytes: Array("after".utf8)), 50)
        }
    }

    /// Found by an outside tester: a header whose size field was changed (its checksum made to
    /// match) was reported as "a cache of format version 1; this library reads version 1". The
    /// error names the header size, and the file is left as it is.
    func testAChangedHeaderSizeIsNamedAndTheFileLeftAlone() throws {
        let file = makeTemporaryDirectory(self) + "/size.cache"
        do {
            let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10)
            for number in 0..<5 { try cache.append(message: Event(name: "event", number: number)) }
        }
        let bytes = try rewriteFixedHeader(of: file) { $0.storeBytes(of: UInt32(8192), toByteOffset: 12, as: UInt32.self) }  // header_size
        XCTAssertThrowsError(try MessageCache<Event>(file: file, maximumBytes: 64 << 10)) { error in
            XCTAssertTrue("\(error)".contains("has a header of 8192 bytes"), "\(error)")
            XCTAssertFalse("\(error)".contains("format version 1; this library"), "\(error)")
        }
        XCTAssertThrowsError(try CacheReader<Event>(file: file, encoding: .json)) { error in
            XCTAssertTrue("\(error)".contains("has a header of 8192 bytes"), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), bytes, "left as it is")
    }

    /// The file is allocated whole when it is made, so a disk that fills later never fails an
    /// append; a cache that cannot be allocated is refused with ENOSPC and leaves nothing behind.
    func testAFullDisk() throws {
        let mountPoint = makeTemporaryDirectory(self) + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mount = try runProgram("/bin/mount", ["-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", mountPoint])
        guard mount.status == 0 else { throw XCTSkip("cannot mount a tmpfs here (needs root): \(mount.output)") }
        defer { _ = try? runProgram("/bin/umount", [mountPoint]) }
        let cache = try MessageCache<Event>(file: mountPoint + "/events.cache", maximumBytes: 256 << 10)
        let filler = mountPoint + "/filler"
        XCTAssertTrue(FileManager.default.createFile(atPath: filler, contents: nil))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: filler))
        let block = Data(repeating: 1, count: 64 << 10)
        var full = false
        while !full {
            do { try handle.write(contentsOf: block) } catch { full = true }
        }
        try handle.close()
        for number in 0..<5000 { try cache.append(message: Event(name: "on a full disk", number: number)) }
        let kept = try cache.messages()
        XCTAssertEqual(kept.last?.number, 4999)
        XCTAssertEqual(kept.map(\.number), Array((5000 - kept.count)..<5000))

        XCTAssertThrowsError(try MessageCache<Event>(file: mountPoint + "/second.cache", maximumBytes: 512 << 10)) { error in
            XCTAssertEqual((error as? LogbookError)?.errno, ENOSPC, "\(error)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountPoint).sorted(), ["events.cache", "filler"],
                       "nothing half-made is left")
    }

    // MARK: - The compact binary encoding

    enum Shape: Codable, Equatable {
        case circle(radius: Double)
        case polygon([Int16])
        case none
    }

    class Base: Codable {
        var id: UInt64
        init(id: UInt64) { self.id = id }
    }

    final class Derived: Base, Equatable {
        var label: String?
        init(id: UInt64, label: String?) {
            self.label = label
            super.init(id: id)
        }
        enum CodingKeys: String, CodingKey { case label }
        required init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            label = try container.decodeIfPresent(String.self, forKey: .label)
            try super.init(from: container.superDecoder())
        }
        override func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(label, forKey: .label)
            try super.encode(to: container.superEncoder())
        }
        static func == (a: Derived, b: Derived) -> Bool { a.id == b.id && a.label == b.label }
    }

    struct Everything: Codable, Equatable {
        var flag: Bool
        var small: Int8
        var negative: Int
        var big: UInt64
        var ratio: Double
        var single: Float
        var text: String
        var optional: String?
        var absent: Int?
        var list: [Int32]
        var nested: [[String]]
        var table: [String: Int]
        var numbered: [Int: String]
        var data: Data
        var date: Date
        var shapes: [Shape]
        var derived: Derived
    }

    func testCompactBinaryRoundTripsWhatJSONDoesInLessSpace() throws {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<200 {
            let value = Everything(
                flag: round % 2 == 0, small: Int8.random(in: .min ... .max, using: &generator),
                negative: Int.random(in: .min ... .max, using: &generator), big: UInt64.random(in: 0 ... .max, using: &generator),
                ratio: Double.random(in: -1e300...1e300, using: &generator), single: Float.random(in: -1...1, using: &generator),
                text: String((0..<Int.random(in: 0...40, using: &generator)).map { _ in "aé😀\u{0}z".randomElement(using: &generator)! }),
                optional: round % 3 == 0 ? nil : "present", absent: nil,
                list: (0..<round % 7).map { _ in Int32.random(in: .min ... .max, using: &generator) },
                nested: [[], ["a"], ["b", "c"]], table: ["one": 1, "two": -2], numbered: [1: "one", -5: "minus five"],
                data: Data((0..<round % 50).map { UInt8(truncatingIfNeeded: $0 &* 31) }),
                date: Date(timeIntervalSince1970: Double(round) * 1000.5),
                shapes: [.circle(radius: 2.5), .polygon([1, -2, 3]), .none],
                derived: Derived(id: UInt64(round), label: round % 2 == 0 ? "even" : nil))
            let bytes = try CompactBinaryEncoder().encode(value)
            XCTAssertEqual(try CompactBinaryDecoder().decode(Everything.self, from: bytes), value)
            let json = try JSONEncoder().encode(value)
            XCTAssertEqual(try JSONDecoder().decode(Everything.self, from: json), value)
            XCTAssertLessThan(bytes.count, json.count)
        }
        let event = Event(name: "launch", number: 42)
        let compact = try CompactBinaryEncoder().encode(event), json = try JSONEncoder().encode(event)
        XCTAssertLessThan(compact.count, json.count)
    }

    func testCompactBinaryRefusesDamageWithoutCrashing() throws {
        struct Small: Codable { var value: Int8 }
        struct Wide: Codable { var value: Int }
        XCTAssertThrowsError(try CompactBinaryDecoder().decode(Small.self, from: try CompactBinaryEncoder().encode(Wide(value: 300))))
        let good = try CompactBinaryEncoder().encode(Everything(
            flag: true, small: 1, negative: -1, big: 1, ratio: 1, single: 1, text: "t", optional: nil, absent: nil,
            list: [1], nested: [["x"]], table: ["a": 1], numbered: [1: "b"], data: Data([1, 2]), date: Date(),
            shapes: [.none], derived: Derived(id: 1, label: "l")))
        var generator = SystemRandomNumberGenerator()
        var refused = 0
        for _ in 0..<5000 {
            var bytes = good
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &generator)))
            case 1: bytes[Int.random(in: 0..<bytes.count, using: &generator)] ^= UInt8(1 << Int.random(in: 0..<8, using: &generator))
            default: bytes = (0..<Int.random(in: 0..<64, using: &generator)).map { _ in UInt8.random(in: 0 ... .max, using: &generator) }
            }
            if (try? CompactBinaryDecoder().decode(Everything.self, from: bytes)) == nil { refused += 1 }
        }
        XCTAssertGreaterThan(refused, 4000)
        // deep nesting is bounded, not a stack overflow
        var deep: [UInt8] = []
        for _ in 0..<100_000 { deep += [9, 1] }  // arrays of one array, 100,000 deep
        deep.append(0)
        XCTAssertThrowsError(try CompactBinaryDecoder().decode([[Int]].self, from: deep))
    }

    func testACacheWithTheCompactEncoding() throws {
        let file = makeTemporaryDirectory(self) + "/compact.cache"
        let cache = try MessageCache<Event>(file: file, maximumBytes: 64 << 10, encoding: .compactBinary)
        for number in 0..<100 { try cache.append(message: Event(name: "event \(number)", number: number)) }
        XCTAssertEqual(try cache.messages(), (0..<100).map { Event(name: "event \($0)", number: $0) })
    }
}
