import CLogbookUpload

/// SHA-256 (FIPS 180-4): the default identifier of a spooled item is the hash of its content, so
/// that the same file submitted twice, or again after a relaunch, is one item with one
/// `Idempotency-Key`. The rounds are in C (CSources/CLogbookUpload): the package has no crypto
/// dependency (swift-crypto is not in the mirror), and this is the uploader's one hot loop.
public struct SHA256: Sendable {
    private var hash = lb_sha256()

    public init() { lb_sha256_init(&hash) }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        lb_sha256_update(&hash, base, bytes.count)
    }

    public mutating func update(_ bytes: some Collection<UInt8>) {
        if bytes.withContiguousStorageIfAvailable({ update(UnsafeRawBufferPointer($0)) }) == nil {
            Array(bytes).withUnsafeBytes { update($0) }
        }
    }

    /// The 32-byte digest (the hasher is spent afterwards).
    public mutating func finish() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        digest.withUnsafeMutableBufferPointer { lb_sha256_final(&hash, $0.baseAddress!) }
        return digest
    }

    /// The digest of `bytes` as 64 lowercase hex digits.
    public static func hex(of bytes: some Collection<UInt8>) -> String {
        var hasher = SHA256()
        hasher.update(bytes)
        return hex(hasher.finish())
    }

    public static func hex(_ digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(digest.count * 2)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 15)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes that hex digits spell (two per byte), or nil: another length than twice
    /// `count` when given, or a character that is not a hex digit (uppercase refused when
    /// `lowercaseOnly`, as in Logbook's content keys). The one hex parser of the uploader and the
    /// exporters (content keys, trace ids).
    package static func bytes(hex text: String, count: Int? = nil, lowercaseOnly: Bool = false) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0, count.map({ digits.count == $0 * 2 }) ?? true else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70 where !lowercaseOnly: c - 55
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[i]), let low = value(digits[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}
