// The Logbook write path in pure Swift: the same bundle, chunk, record and meta bytes as the C
// core (docs/FORMAT.md), with no C of our own, so that the benchmarks show what the C core buys.
// Swift has no rdtsc: records carry CLOCK_MONOTONIC nanoseconds (clock kind 2), as the C core does
// where the TSC is not invariant. Benchmark code: records must fit in a chunk (no fragments), and
// the bundle is created fresh (no recovery, no writer lock).
import Atomics
#if canImport(Glibc)
import Glibc
#endif

public enum PureSwiftError: Error { case system(String, Int32) }

/// CRC-32C, table driven, as in the C core's common.c.
enum CRC32C {
    static let table: [UInt32] = (0..<256).map { i -> UInt32 in
        var c = UInt32(i)
        for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        return c
    }

    static func checksum(_ bytes: UnsafeRawBufferPointer, _ seed: UInt32 = 0) -> UInt32 {
        var crc = ~seed
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return ~crc
    }
}

/// Little-endian byte building for headers and meta entries.
struct ByteBuilder {
    var bytes: [UInt8] = []
    mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    mutating func string(_ s: String) {
        u32(UInt32(s.utf8.count))
        bytes += s.utf8
    }
}

func nowNanoseconds(_ clock: clockid_t) -> UInt64 {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

public final class PureSwiftBundle: @unchecked Sendable {
    let ring: UnsafeMutableRawPointer
    let mapLength: Int
    let chunkSize: Int
    let chunkCount: Int
    let metaFD: Int32
    let ringFD: Int32
    var metaOffset: Int = 16
    let nextSequence: UnsafeAtomic<UInt64>
    /// The ring header's claim counter (chunks_claimed): every claim takes the next number.
    let nextClaim: UnsafeAtomic<UInt64>
    static let headerSize = 4096

    public init(path: String, capacity: Int, chunkSize: Int) throws {
        mkdir(path, 0o700)
        self.chunkSize = chunkSize
        chunkCount = capacity / chunkSize
        mapLength = Self.headerSize + chunkCount * chunkSize
        ringFD = open(path + "/ring", O_RDWR | O_CREAT | O_TRUNC, 0o600)
        metaFD = open(path + "/meta", O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard ringFD >= 0, metaFD >= 0 else { throw PureSwiftError.system("open", errno) }
        let err = posix_fallocate(ringFD, 0, off_t(mapLength))
        guard err == 0 else { throw PureSwiftError.system("posix_fallocate", err) }
        guard let map = mmap(nil, mapLength, PROT_READ | PROT_WRITE, MAP_SHARED, ringFD, 0), map != MAP_FAILED else {
            throw PureSwiftError.system("mmap", errno)
        }
        ring = map
        for offset in stride(from: 0, to: mapLength, by: 4096) { map.storeBytes(of: 0, toByteOffset: offset, as: UInt8.self) }

        // Ring header: the fields before the CRC, then the CRC of bytes 0..<40.
        var header = ByteBuilder()
        header.bytes += Array("LBRING01".utf8)
        header.u32(2)  // format version
        header.u32(UInt32(Self.headerSize))
        header.u32(UInt32(chunkSize))
        header.u32(UInt32(chunkCount))
        header.u32(1)  // overwrite
        header.u32(0)
        header.u64(nowNanoseconds(CLOCK_REALTIME))
        let crc = header.bytes.withUnsafeBytes { CRC32C.checksum($0) }
        header.u32(crc)
        let mapped = ring
        header.bytes.withUnsafeBytes { mapped.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        nextSequence = UnsafeAtomic(at: (mapped + 64).assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
        nextSequence.store(1, ordering: .relaxed)
        nextClaim = UnsafeAtomic(at: (mapped + 144).assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
        ring.storeBytes(of: UInt32(getpid()), toByteOffset: 72, as: UInt32.self)
        ring.storeBytes(of: UInt32(1), toByteOffset: 76, as: UInt32.self)

        var meta = ByteBuilder()
        meta.bytes += Array("LBMETA01".utf8)
        meta.u32(2)  // format version
        meta.u32(0)
        let metaFile = metaFD
        _ = meta.bytes.withUnsafeBytes { pwrite(metaFile, $0.baseAddress, $0.count, 0) }
        var session = ByteBuilder()
        session.u32(0)
        session.u32(UInt32(getpid()))
        session.u64(1_000_000_000)
        session.u32(2)  // CLOCK_MONOTONIC nanoseconds
        session.u32(0)
        let mono = nowNanoseconds(CLOCK_MONOTONIC)
        session.u64(mono)
        session.u64(nowNanoseconds(CLOCK_REALTIME))
        session.string("pure-swift")
        session.string("PureSwiftLogbook")
        try appendMeta(kind: 1, session.bytes)
    }

    deinit {
        munmap(ring, mapLength)
        close(ringFD)
        close(metaFD)
    }

    func appendMeta(kind: UInt16, _ body: [UInt8]) throws {
        var entry = ByteBuilder()
        entry.u32(UInt32(body.count))
        entry.u32(body.withUnsafeBytes { CRC32C.checksum($0) })
        entry.u16(kind)
        entry.u16(0)
        entry.bytes += body
        let written = entry.bytes.withUnsafeBytes { pwrite(metaFD, $0.baseAddress, $0.count, off_t(metaOffset)) }
        guard written == entry.bytes.count else { throw PureSwiftError.system("pwrite", errno) }
        metaOffset += entry.bytes.count
    }

    /// Registers a logger (id) and a call site (id) in session 0.
    public func register(logger id: UInt16, name: String, site: UInt32, template: String) throws {
        var logger = ByteBuilder()
        logger.u32(0)
        logger.u16(id)
        logger.u16(0)
        logger.string(name)
        try appendMeta(kind: 2, logger.bytes)
        var entry = ByteBuilder()
        entry.u32(0)
        entry.u32(site)
        entry.u32(1)
        entry.u32(1)
        entry.string("PureSwiftLogbook.swift")
        entry.string("benchmark")
        entry.string(template)
        try appendMeta(kind: 3, entry.bytes)
    }

    func chunk(_ slot: Int) -> UnsafeMutableRawPointer { ring + Self.headerSize + slot * chunkSize }

    func state(_ chunk: UnsafeMutableRawPointer) -> UnsafeAtomic<UInt32> {
        UnsafeAtomic(at: (chunk + 4).assumingMemoryBound(to: UInt32.AtomicRepresentation.self))
    }
}

/// One thread's writer: owns a chunk, appends records with plain stores and commits each with a
/// release store of its header word.
public struct PureSwiftWriter {
    let bundle: PureSwiftBundle
    var chunk: UnsafeMutableRawPointer?
    var cursor = 0
    var tagBits: UInt64 = 0
    var previousSequence: UInt64 = 0
    var recordCount: UInt32 = 0
    let threadID = UInt32(truncatingIfNeeded: pthread_self() >> 12)  // gettid is not imported into Swift

    public init(bundle: PureSwiftBundle) { self.bundle = bundle }

    mutating func claim() {
        if let chunk {
            bundle.state(chunk).store(3, ordering: .releasing)  // sealed
        }
        while true {
            let sequence = bundle.nextSequence.loadThenWrappingIncrement(ordering: .relaxed)
            let next = bundle.chunk(Int(sequence % UInt64(bundle.chunkCount)))
            let state = bundle.state(next)
            let old = state.load(ordering: .acquiring)
            guard old != 1, old != 2, state.compareExchange(expected: old, desired: 1, ordering: .acquiringAndReleasing).exchanged
            else { continue }
            // The chunk header of format 2 (logbook_format.h): sequence, claim number, anchors,
            // previous chunk as a delta, thread, session, CRC, committed, record count.
            next.storeBytes(of: 0, toByteOffset: 0, as: UInt32.self)
            let claim = bundle.nextClaim.loadThenWrappingIncrement(ordering: .relaxed)
            next.storeBytes(of: sequence, toByteOffset: 8, as: UInt64.self)
            next.storeBytes(of: claim, toByteOffset: 16, as: UInt64.self)
            next.storeBytes(of: nowNanoseconds(CLOCK_MONOTONIC), toByteOffset: 24, as: UInt64.self)
            next.storeBytes(of: nowNanoseconds(CLOCK_REALTIME), toByteOffset: 32, as: UInt64.self)
            let delta = previousSequence == 0 ? 0 : UInt32(truncatingIfNeeded: sequence - previousSequence)
            next.storeBytes(of: delta, toByteOffset: 40, as: UInt32.self)
            next.storeBytes(of: threadID, toByteOffset: 44, as: UInt32.self)
            next.storeBytes(of: UInt32(0), toByteOffset: 48, as: UInt32.self)
            next.storeBytes(of: UInt32(64), toByteOffset: 56, as: UInt32.self)
            next.storeBytes(of: UInt32(0), toByteOffset: 60, as: UInt32.self)
            next.storeBytes(of: UInt64(0), toByteOffset: 64, as: UInt64.self)
            next.storeBytes(of: UInt32(0x4B43_424C), toByteOffset: 0, as: UInt32.self)
            var crc = CRC32C.checksum(UnsafeRawBufferPointer(start: next, count: 4))
            crc = CRC32C.checksum(UnsafeRawBufferPointer(start: next + 8, count: 44), crc)
            next.storeBytes(of: crc, toByteOffset: 52, as: UInt32.self)
            state.store(2, ordering: .releasing)  // active
            chunk = next
            cursor = 64
            recordCount = 0
            previousSequence = sequence
            tagBits = UInt64(UInt16(truncatingIfNeeded: sequence)) << 32 | UInt64(0xB7) << 56
            return
        }
    }

    /// Writes "request {} took {} ms ok={}" with (Int, Double, Bool): the benchmarks' message shape.
    @inline(__always)
    public mutating func log(site: UInt32, logger: UInt16, level: UInt8, id: Int, ms: Double, ok: Bool) {
        let length = 24 + 9 + 9 + 2
        if chunk == nil || cursor + length + 8 > bundle.chunkSize { claim() }
        let base = chunk!
        let record = base + cursor
        record.storeBytes(of: nowNanoseconds(CLOCK_MONOTONIC), toByteOffset: 8, as: UInt64.self)
        record.storeBytes(of: site, toByteOffset: 16, as: UInt32.self)
        record.storeBytes(of: UInt32(logger) | UInt32(level) << 16, toByteOffset: 20, as: UInt32.self)
        record.storeBytes(of: UInt8(6), toByteOffset: 24, as: UInt8.self)  // int
        record.storeBytes(of: Int64(id), toByteOffset: 25, as: Int64.self)
        record.storeBytes(of: UInt8(13), toByteOffset: 33, as: UInt8.self)  // double
        record.storeBytes(of: ms, toByteOffset: 34, as: Double.self)
        record.storeBytes(of: UInt8(1), toByteOffset: 42, as: UInt8.self)  // bool
        record.storeBytes(of: ok ? UInt8(1) : 0, toByteOffset: 43, as: UInt8.self)
        let next = cursor + (length + 7) & ~7
        if next + 8 <= bundle.chunkSize { (base + next).storeBytes(of: UInt64(0), as: UInt64.self) }
        let header = UnsafeAtomic<UInt64>(at: record.assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
        header.store(UInt64(length) | tagBits | UInt64(1) << 48, ordering: .releasing)
        UnsafeAtomic<UInt32>(at: (base + 56).assumingMemoryBound(to: UInt32.AtomicRepresentation.self))
            .store(UInt32(next), ordering: .releasing)
        recordCount += 1
        UnsafeAtomic<UInt32>(at: (base + 60).assumingMemoryBound(to: UInt32.AtomicRepresentation.self))
            .store(recordCount, ordering: .releasing)
        cursor = next
    }

    /// Seals the chunk so readers count it complete.
    public mutating func seal() {
        if let chunk { bundle.state(chunk).store(3, ordering: .releasing) }
        chunk = nil
    }
}
