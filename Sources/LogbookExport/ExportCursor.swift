import CLogbook
import Foundation
import Logbook

/// Which records a destination acknowledged, per chunk: the reader returns entries in time order,
/// and a later read can return entries older than some already exported (a chunk sealed late), so
/// a time is no cursor. An entry is exported when its offset is at or below its chunk's mark. A
/// chunk without a mark has had nothing exported (marks are dropped only for chunks the source no
/// longer holds, `forget(below:)`). The file's layout is in docs/FORMAT.md, "Export cursor".
public struct ExportCursor: Sendable, Equatable {
    /// The ring these chunk sequences belong to (its `created_wall_ns`; 0: not known yet). A
    /// bundle made again at the same path starts over.
    public var ring: UInt64 = 0
    /// Marks below it were dropped: the source held no chunk below it when it was last read whole.
    public var lowWatermark: UInt64 = 0
    /// Chunk sequence → the highest record offset acknowledged in it.
    public var marks: [UInt64: UInt32] = [:]
    /// The batch in flight, written before it is sent: after a kill, what it covered and was
    /// exported again is counted as repeated.
    public var inFlight: [UInt64: UInt32] = [:]
    public var exported: UInt64 = 0
    public var repeated: UInt64 = 0
    /// What of `exported` was of earlier rings (the cursor started over since): the records of
    /// this ring acknowledged are `exported - exportedOfEarlierRings`.
    public var exportedOfEarlierRings: UInt64 = 0
    /// Records of this ring reported lost to the destination: overwritten in the ring before they
    /// could be read, and in archive files retention deleted before they could be read. A read of
    /// the whole source tops them up to what the ring's counters say was written and is neither
    /// acknowledged nor unreadable (``Exporter``), so a loss between two runs is counted too.
    /// nil: not known (a cursor saved before version 3): the next such read takes what it finds as
    /// already reported.
    public var lostOverwritten: UInt64? = 0
    public var lostRetired: UInt64? = 0

    public init() {}

    /// Records of this ring acknowledged (exported or given up).
    public var exportedOfThisRing: UInt64 { exported >= exportedOfEarlierRings ? exported - exportedOfEarlierRings : 0 }

    public func isExported(_ entry: LogEntry) -> Bool {
        isExported(chunkSequence: entry.chunkSequence, chunkOffset: entry.chunkOffset)
    }

    public func isExported(chunkSequence: UInt64, chunkOffset: UInt32) -> Bool {
        marks[chunkSequence].map { chunkOffset <= $0 } ?? false
    }

    /// The highest offset per chunk of `entries` (what a batch covers).
    public static func extent(of entries: some Sequence<LogEntry>) -> [UInt64: UInt32] {
        var extent: [UInt64: UInt32] = [:]
        for entry in entries { extent[entry.chunkSequence] = max(extent[entry.chunkSequence] ?? 0, entry.chunkOffset) }
        return extent
    }

    /// The highest offset per chunk of a slice of entries, read in place (no copy of a record).
    public static func extent(of entries: ArraySlice<LogEntry>) -> [UInt64: UInt32] {
        var extent: [UInt64: UInt32] = [:]
        var index = entries.startIndex
        while index < entries.endIndex {
            // a run of the same chunk: one dictionary update
            let sequence = entries[index].chunkSequence
            var highest = entries[index].chunkOffset
            index += 1
            while index < entries.endIndex && entries[index].chunkSequence == sequence {
                highest = max(highest, entries[index].chunkOffset)
                index += 1
            }
            extent[sequence] = max(extent[sequence] ?? 0, highest)
        }
        return extent
    }

    /// Marks a slice of entries acknowledged, read in place.
    public mutating func acknowledge(_ entries: ArraySlice<LogEntry>) {
        var count: UInt64 = 0
        for index in entries.indices {
            let sequence = entries[index].chunkSequence, offset = entries[index].chunkOffset
            if let mark = marks[sequence] {
                if offset <= mark { continue }
            }
            marks[sequence] = max(marks[sequence] ?? 0, offset)
            count += 1
        }
        exported += count
        inFlight = [:]
    }

    /// Marks `entries` acknowledged (the batch in flight is then done).
    public mutating func acknowledge(_ entries: some Sequence<LogEntry>) {
        var count: UInt64 = 0
        for entry in entries where !isExported(entry) {
            marks[entry.chunkSequence] = max(marks[entry.chunkSequence] ?? 0, entry.chunkOffset)
            count += 1
        }
        exported += count
        inFlight = [:]
    }

    /// Whether `entry` was in the batch in flight when the exporter stopped (it may have reached
    /// the destination: sending it again is a counted repeat).
    public func wasInFlight(_ entry: LogEntry) -> Bool {
        inFlight[entry.chunkSequence].map { entry.chunkOffset <= $0 } ?? false
    }

    /// Drops the marks of chunks below `oldest`, the lowest chunk sequence of a read of everything
    /// the source holds: a chunk with an exported record that is still held is in that read, so
    /// the marks dropped are of chunks gone (overwritten, deleted by retention). A chunk below
    /// `oldest` that appears later (claimed, but its first record not committed at that read) has
    /// no mark, and nothing of it was exported: it is exported whole.
    public mutating func forget(below oldest: UInt64) {
        guard oldest > lowWatermark else { return }
        lowWatermark = oldest
        marks = marks.filter { $0.key >= oldest }
        inFlight = inFlight.filter { $0.key >= oldest }
    }

    // MARK: - The file

    static let magic = Array("LBCURSR1".utf8)

    /// The snapshot's version: 3 counts the records reported lost; 2 named its destination (1,
    /// before, did not). Both are still read.
    static let version: UInt32 = 3

    /// Little-endian: magic, version (u32 3), count of marks (u32), count in flight (u32), the
    /// store's generation (u32), ring, low watermark, exported, repeated (u64 each), the
    /// destination's key (``destinationKey(_:)``) and a reserved u32, exported of earlier rings,
    /// lost overwritten, lost retired (u64 each), a reserved u64, then (sequence u64, offset u32,
    /// reserved u32) per mark and per entry in flight, then the CRC-32C of everything before it.
    func encoded(generation: UInt32 = 0, destination: String) -> [UInt8] {
        var out = Self.magic
        func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { out += $0 } }
        put(Self.version)
        put(UInt32(marks.count))
        put(UInt32(inFlight.count))
        put(generation)
        put(ring)
        put(lowWatermark)
        put(exported)
        put(repeated)
        put(Self.destinationKey(destination))
        put(UInt32(0))
        put(exportedOfEarlierRings)
        put(lostOverwritten ?? Self.lostUnknown)
        put(lostRetired ?? Self.lostUnknown)
        put(UInt64(0))
        for table in [marks, inFlight] {
            for (sequence, offset) in table.sorted(by: { $0.key < $1.key }) {
                put(sequence)
                put(offset)
                put(UInt32(0))
            }
        }
        put(out.withUnsafeBytes { lb_crc32c(0, $0.baseAddress, $0.count) })
        return out
    }

    /// How the snapshot says a count of records lost is not known.
    static let lostUnknown = UInt64.max

    static let journalMagic: UInt32 = 0x4A43_424C  // "LBCJ", little-endian

    /// One journal entry (docs/FORMAT.md, "Export cursor"): magic, length, generation, the
    /// counts of changed marks and of entries in flight, the snapshot's key (u32 each: see
    /// ``ExportCursorStore``), exported, repeated (u64 each),
    /// then (sequence u64, offset u32, reserved u32) per changed mark and per entry in flight, then
    /// the CRC-32C of everything before it.
    func journalEntry(changedChunks chunks: some Collection<UInt64>, generation: UInt32, snapshot: UInt32) -> [UInt8] {
        let changed = chunks.compactMap { sequence in marks[sequence].map { (sequence, $0) } }
        var out: [UInt8] = []
        out.reserveCapacity(40 + 16 * (changed.count + inFlight.count) + 4)
        func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { out += $0 } }
        put(Self.journalMagic)
        put(UInt32(40 + 16 * (changed.count + inFlight.count) + 4))
        put(generation)
        put(UInt32(changed.count))
        put(UInt32(inFlight.count))
        put(snapshot)
        put(exported)
        put(repeated)
        for (sequence, offset) in changed + inFlight.map({ ($0.key, $0.value) }) {
            put(sequence)
            put(offset)
            put(UInt32(0))
        }
        put(out.withUnsafeBytes { lb_crc32c(0, $0.baseAddress, $0.count) })
        return out
    }

    /// Applies the journal entry at `at` if it is whole, sound, of `generation` and follows the
    /// snapshot whose key is `snapshot`: returns its length and generation, or nil (the end of what
    /// can be trusted).
    mutating func apply(journalEntry bytes: [UInt8], at: Int, generation: UInt32, snapshot: UInt32) -> (Int, UInt32)? {
        guard bytes.count - at >= 44 else { return nil }
        func get<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T {
            bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: at + offset, as: T.self)) }
        }
        let length = Int(get(4, UInt32.self))
        guard get(0, UInt32.self) == Self.journalMagic, length >= 44, length <= bytes.count - at,
              get(8, UInt32.self) == generation, get(20, UInt32.self) == snapshot else { return nil }
        let changed = Int(get(12, UInt32.self)), flights = Int(get(16, UInt32.self))
        guard length == 40 + 16 * (changed + flights) + 4 else { return nil }
        let crc = bytes.withUnsafeBytes { lb_crc32c(0, $0.baseAddress! + at, length - 4) }
        guard get(length - 4, UInt32.self) == crc else { return nil }
        exported = get(24, UInt64.self)
        repeated = get(32, UInt64.self)
        inFlight = [:]
        for index in 0..<(changed + flights) {
            let sequence = get(40 + 16 * index, UInt64.self), offset = get(48 + 16 * index, UInt32.self)
            if index < changed { marks[sequence] = offset } else { inFlight[sequence] = offset }
        }
        return (length, generation)
    }

    /// The generation a file was saved with (``ExportCursorStore``: which of two files is newer).
    static func generation(of bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 20, as: UInt32.self)) }
    }

    /// What a snapshot says of its destination: the CRC-32C of the destination's name (NAME in
    /// `NAME.cursor`). A snapshot copied or renamed from another destination's name says another.
    static func destinationKey(_ destination: String) -> UInt32 {
        var name = destination
        return name.withUTF8 { lb_crc32c(0, $0.baseAddress, $0.count) }
    }

    /// The destination key of a snapshot that ``init(decoding:)`` took; nil for a version 1
    /// snapshot, which did not name its destination.
    static func destinationKey(of bytes: [UInt8]) -> UInt32? {
        guard bytes.count >= 64, bytes.withUnsafeBytes({ UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt32.self)) }) >= 2
        else { return nil }
        return bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 56, as: UInt32.self)) }
    }

    init?(decoding bytes: [UInt8]) {
        guard bytes.count >= 60, Array(bytes.prefix(8)) == Self.magic else { return nil }
        let crc = bytes.withUnsafeBytes { lb_crc32c(0, $0.baseAddress, bytes.count - 4) }
        func get<T: FixedWidthInteger>(_ at: Int, _: T.Type) -> T {
            bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: T.self)) }
        }
        guard get(bytes.count - 4, UInt32.self) == crc else { return nil }
        // version 1: no destination key, entries from 56; version 2: entries from 64; version 3:
        // the counts of records lost, entries from 96
        let version = get(8, UInt32.self)
        guard (1...3).contains(version) else { return nil }
        let header = [56, 64, 96][Int(version) - 1]
        let markCount = Int(get(12, UInt32.self)), flightCount = Int(get(16, UInt32.self))
        guard bytes.count == header + 16 * (markCount + flightCount) + 4 else { return nil }
        ring = get(24, UInt64.self)
        lowWatermark = get(32, UInt64.self)
        exported = get(40, UInt64.self)
        repeated = get(48, UInt64.self)
        if version >= 3 {
            exportedOfEarlierRings = get(64, UInt64.self)
            let overwritten = get(72, UInt64.self), retired = get(80, UInt64.self)
            lostOverwritten = overwritten == Self.lostUnknown ? nil : overwritten
            lostRetired = retired == Self.lostUnknown ? nil : retired
        } else {
            // Saved by a version that did not count them: what was lost before is taken as reported.
            lostOverwritten = nil
            lostRetired = nil
        }
        var at = header
        for index in 0..<(markCount + flightCount) {
            let sequence = get(at, UInt64.self), offset = get(at + 8, UInt32.self)
            if index < markCount { marks[sequence] = offset } else { inFlight[sequence] = offset }
            at += 16
        }
    }
}

/// Cursors kept in a private directory (`logbook_files.h`'s rules), per destination name: a
/// snapshot, `NAME.cursor` (the whole cursor, replaced atomically and durably), and a journal,
/// `NAME.journal`, of what changed since it (appended without fsync, a few dozen bytes per
/// acknowledged batch whatever the number of marks). A killed process loses nothing it appended;
/// a power loss may lose the journal's tail (detected by its checksums), and the snapshot's
/// batches in flight are then sent again. docs/FORMAT.md, "Export cursor".
public final class ExportCursorStore: @unchecked Sendable {
    public let path: String
    private let directory: Int32
    private struct Journal {
        var fd: Int32
        /// Where the next entry goes.
        var end: Int64
        /// The generation of the last snapshot or entry written (the next entry's is one more).
        var generation: UInt32
        /// The snapshot's key, in each entry: the CRC-32C of the snapshot's bytes, continued over
        /// the destination's name. A journal copied from another cursor, or left by an older
        /// snapshot, does not follow this one.
        var key: UInt32 = 0
    }

    /// The key of `snapshot` (the bytes of `NAME.cursor`) for `destination`.
    static func key(of snapshot: [UInt8], destination: String) -> UInt32 {
        var name = destination
        let seed = name.withUTF8 { lb_crc32c(0, $0.baseAddress, $0.count) }
        return snapshot.withUnsafeBytes { lb_crc32c(seed, $0.baseAddress, $0.count) }
    }
    private let journals = Locked<[String: Journal]>([:])

    public init(path: String) throws(LogbookError) {
        let directory = lb_dir_open_private(path, "cursor directory", 1)
        try check(directory, .exportCursor, "lb_dir_open_private", path: path, detailed: true)
        self.path = path
        self.directory = directory
    }

    deinit {
        close(directory)
        for fd in lockDescriptors.withLock({ $0 }) { close(fd) }
        for journal in journals.withLock({ $0.values }) { close(journal.fd) }
    }

    /// The cursor saved for `destination`: its snapshot with the journal's entries after it
    /// applied, a new one if none was saved, or `EPROTO` if the snapshot is damaged (never silently
    /// a new one: that would export everything again) or names another destination (a copy: taken,
    /// it would skip what that one acknowledged). The journal is read up to its first entry
    /// that is cut short, damaged or not the next generation (a power loss's tail).
    public func load(_ destination: String) throws(LogbookError) -> ExportCursor {
        guard let snapshot = try read(destination + ".cursor") else {
            // Nothing saved (or the cursor was deleted to start over): a journal left is of an older cursor.
            try startJournal(destination, with: [], generation: 0, key: 0)
            return ExportCursor()
        }
        guard var cursor = ExportCursor(decoding: snapshot) else {
            throw LogbookError(subject: .exportCursor, operation: "ExportCursorStore.load", path: path + "/" + destination + ".cursor", errno: EPROTO,
                               detail: "the cursor file is damaged (its checksum or size is wrong)")
        }
        if let named = ExportCursor.destinationKey(of: snapshot), named != ExportCursor.destinationKey(destination) {
            // Taken, it would skip here what another destination acknowledged.
            throw LogbookError(subject: .exportCursor, operation: "ExportCursorStore.load", path: path + "/" + destination + ".cursor", errno: EPROTO,
                               detail: "the cursor file was saved for another destination (copied or renamed): refused, "
                                   + "so that what that destination acknowledged is not skipped here; delete it to export everything again")
        }
        var generation = ExportCursor.generation(of: snapshot)
        let key = Self.key(of: snapshot, destination: destination)
        let entries = try read(destination + ".journal") ?? []
        var at = 0
        while let (length, next) = cursor.apply(journalEntry: entries, at: at, generation: generation &+ 1, snapshot: key) {
            at += length
            generation = next
        }
        // A new journal of the good entries only: what followed them (a torn tail, entries of a
        // power loss's other moment) is gone, not written over.
        try startJournal(destination, with: entries[..<at], generation: generation, key: key)
        return cursor
    }

    /// Makes `NAME.journal` afresh holding `prefix` and keeps it open for appends. The file is
    /// replaced (written under another name, renamed over it), so whatever had the name before, a
    /// hard link to a file elsewhere included, is never written or truncated.
    @discardableResult
    private func startJournal(_ destination: String, with prefix: ArraySlice<UInt8>, generation: UInt32,
                              key: UInt32) throws(LogbookError) -> Journal {
        let name = destination + ".journal"
        let replaced = prefix.withUnsafeBytes { lb_file_replace_at(directory, name, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), $0.count, path) }
        try check(replaced, .exportCursor, "lb_file_replace_at", path: path, detailed: true)
        let fd = lb_file_open_at(directory, name, O_RDWR, path)
        try check(fd, .exportCursor, "lb_file_open_at", path: path + "/" + name, detailed: true)
        let journal = Journal(fd: fd, end: Int64(prefix.count), generation: generation, key: key)
        if let old = journals.withLock({ table in defer { table[destination] = journal }; return table[destination] }) { close(old.fd) }
        return journal
    }

    /// The open journal of `destination`, started empty when this store has none yet.
    private func openJournal(_ destination: String) throws(LogbookError) -> Journal {
        if let open = journals.withLock({ $0[destination] }) { return open }
        return try startJournal(destination, with: [], generation: 0, key: 0)
    }

    /// The bytes of `name`, nil when it does not exist.
    private func read(_ name: String) throws(LogbookError) -> [UInt8]? {
        let fd = lb_file_open_at(directory, name, O_RDONLY, path)
        if fd == -ENOENT { return nil }
        try check(fd, .exportCursor, "lb_file_open_at", path: path + "/" + name, detailed: true)
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = try systemCall(.exportCursor, "read", path: path + "/" + name) {
                buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            }
            if n == 0 { break }
            bytes += buffer[..<n]
        }
        return bytes
    }

    /// Takes the cursor of `destination` for this store (an OFD lock on `NAME.lock`, held until
    /// the store is released): a second exporter of the same destination and source, in this
    /// process or another, gets `EWOULDBLOCK` with a sentence instead of sending everything twice.
    public func lock(_ destination: String) throws(LogbookError) {
        let name = destination + ".lock"
        let fd = lb_file_open_at(directory, name, O_RDWR | O_CREAT, path)
        try check(fd, .exportCursor, "lb_file_open_at", path: path + "/" + name, detailed: true)
        let locked = lb_file_lock_exclusive(fd)
        if locked != 0 {
            close(fd)
            throw LogbookError(subject: .exportCursor, operation: "ExportCursorStore.lock", path: path + "/" + destination + ".cursor", errno: -locked,
                               detail: locked == -EWOULDBLOCK ? "another exporter uses this cursor (the same destination and source)" : nil)
        }
        lockDescriptors.withLock { $0.append(fd) }
    }

    private let lockDescriptors = Locked<[Int32]>([])

    /// Saves the whole of `cursor` for `destination` as its snapshot (write, fsync, rename,
    /// directory fsync: about 0.3 ms here), and empties the journal.
    public func save(_ cursor: ExportCursor, as destination: String) throws(LogbookError) {
        var journal = try openJournal(destination)
        journal.generation &+= 1
        let bytes = cursor.encoded(generation: journal.generation, destination: destination)
        let result = bytes.withUnsafeBytes { lb_file_replace_at(directory, destination + ".cursor", $0.baseAddress, $0.count, path) }
        try check(result, .exportCursor, "lb_file_replace_at", path: path, detailed: true)
        // The snapshot holds everything: entries left in the journal are of older generations.
        try systemCall(.exportCursor, "ftruncate", path: path + "/" + destination + ".journal") { ftruncate(journal.fd, 0) }
        journal.end = 0
        journal.key = Self.key(of: bytes, destination: destination)
        journals.withLock { $0[destination] = journal }
    }

    /// Appends to the journal of `destination` what changed since the last save: the marks of
    /// `chunks`, the batches in flight, and the totals (one `pwrite`, no fsync).
    public func append(_ cursor: ExportCursor, changedChunks chunks: some Collection<UInt64>, as destination: String) throws(LogbookError) {
        var journal = try openJournal(destination)
        journal.generation &+= 1
        let bytes = cursor.journalEntry(changedChunks: chunks, generation: journal.generation, snapshot: journal.key)
        var done = 0
        let journalPath = path + "/" + destination + ".journal"
        while done < bytes.count {
            let n = try systemCall(.exportCursor, "pwrite", path: journalPath) {
                bytes.withUnsafeBytes { pwrite(journal.fd, $0.baseAddress! + done, $0.count - done, off_t(journal.end) + off_t(done)) }
            }
            if n == 0 { throw LogbookError(subject: .exportCursor, operation: "pwrite", path: journalPath, errno: EIO) }
            done += n
        }
        journal.end += Int64(bytes.count)
        journals.withLock { $0[destination] = journal }
    }
}
