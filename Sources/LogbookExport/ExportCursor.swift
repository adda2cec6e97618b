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

    public init() {}

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

    /// Little-endian: magic, version (u32 1), count of marks (u32), count in flight (u32), reserved
    /// (u32 0), ring, low watermark, exported, repeated (u64 each), then (sequence u64, offset u32,
    /// reserved u32) per mark and per entry in flight, then the CRC-32C of everything before it.
    func encoded() -> [UInt8] {
        var out = Self.magic
        func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { out += $0 } }
        put(UInt32(1))
        put(UInt32(marks.count))
        put(UInt32(inFlight.count))
        put(UInt32(0))
        put(ring)
        put(lowWatermark)
        put(exported)
        put(repeated)
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

    init?(decoding bytes: [UInt8]) {
        guard bytes.count >= 60, Array(bytes.prefix(8)) == Self.magic else { return nil }
        let crc = bytes.withUnsafeBytes { lb_crc32c(0, $0.baseAddress, bytes.count - 4) }
        func get<T: FixedWidthInteger>(_ at: Int, _: T.Type) -> T {
            bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: T.self)) }
        }
        guard get(bytes.count - 4, UInt32.self) == crc, get(8, UInt32.self) == 1 else { return nil }
        let markCount = Int(get(12, UInt32.self)), flightCount = Int(get(16, UInt32.self))
        guard bytes.count == 56 + 16 * (markCount + flightCount) + 4 else { return nil }
        ring = get(24, UInt64.self)
        lowWatermark = get(32, UInt64.self)
        exported = get(40, UInt64.self)
        repeated = get(48, UInt64.self)
        var at = 56
        for index in 0..<(markCount + flightCount) {
            let sequence = get(at, UInt64.self), offset = get(at + 8, UInt32.self)
            if index < markCount { marks[sequence] = offset } else { inFlight[sequence] = offset }
            at += 16
        }
    }
}

/// Cursors kept in a private directory (`logbook_files.h`'s rules), one file per destination
/// name, replaced atomically (write, fsync, rename, directory fsync).
public final class ExportCursorStore: @unchecked Sendable {
    public let path: String
    private let directory: Int32

    public init(path: String) throws(LogbookError) {
        let directory = lb_dir_open_private(path, "cursor directory", 1)
        try check(directory, "lb_dir_open_private", path: path, detailed: true)
        self.path = path
        self.directory = directory
    }

    deinit {
        close(directory)
        for fd in lockDescriptors.withLock({ $0 }) { close(fd) }
    }

    /// The cursor saved for `destination`, a new one if none was, or `EPROTO` if it is damaged
    /// (never silently a new one: that would export everything again).
    public func load(_ destination: String) throws(LogbookError) -> ExportCursor {
        let name = destination + ".cursor"
        let fd = lb_file_open_at(directory, name, O_RDONLY, path)
        if fd == -ENOENT { return ExportCursor() }
        try check(fd, "lb_file_open_at", path: path + "/" + name, detailed: true)
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 { throw LogbookError(operation: "read", path: path + "/" + name, errno: errno) }
            if n == 0 { break }
            bytes += buffer[..<n]
        }
        guard let cursor = ExportCursor(decoding: bytes) else {
            throw LogbookError(operation: "ExportCursor", path: path + "/" + name, errno: EPROTO,
                               detail: "the cursor file is damaged (its checksum or size is wrong)")
        }
        return cursor
    }

    /// Takes the cursor of `destination` for this store (an OFD lock on `NAME.lock`, held until
    /// the store is released): a second exporter of the same destination and source, in this
    /// process or another, gets `EWOULDBLOCK` with a sentence instead of sending everything twice.
    public func lock(_ destination: String) throws(LogbookError) {
        let name = destination + ".lock"
        let fd = lb_file_open_at(directory, name, O_RDWR | O_CREAT, path)
        try check(fd, "lb_file_open_at", path: path + "/" + name, detailed: true)
        let locked = lb_file_lock_exclusive(fd)
        if locked != 0 {
            close(fd)
            throw LogbookError(operation: "ExportCursorStore", path: path + "/" + destination + ".cursor", errno: -locked,
                               detail: locked == -EWOULDBLOCK ? "another exporter uses this cursor (the same destination and source)" : nil)
        }
        lockDescriptors.withLock { $0.append(fd) }
    }

    private let lockDescriptors = Locked<[Int32]>([])

    public func save(_ cursor: ExportCursor, as destination: String) throws(LogbookError) {
        let bytes = cursor.encoded()
        let result = bytes.withUnsafeBytes { lb_file_replace_at(directory, destination + ".cursor", $0.baseAddress, $0.count, path) }
        try check(result, "lb_file_replace_at", path: path, detailed: true)
    }
}
