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
}
