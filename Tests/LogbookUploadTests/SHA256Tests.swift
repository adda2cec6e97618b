import Foundation
import LogbookTestKit
import XCTest
import CLogbookUpload
import LogbookUpload

/// The item identifier's hash against FIPS 180-4's vectors and `sha256sum`, fed in every split,
/// with the portable rounds and with the x86 SHA extensions (where the CPU has them).
final class SHA256Tests: XCTestCase {
    /// Runs `body` with the fastest rounds, then with the portable ones.
    func withBothImplementations(_ body: (String) throws -> Void) rethrows {
        defer { lb_sha256_use_portable(0) }
        for portable in [false, true] {
            lb_sha256_use_portable(portable ? 1 : 0)
            try body(portable ? "portable" : (lb_sha256_accelerated() == 1 ? "SHA extensions" : "portable (no SHA extensions)"))
        }
    }

    func testKnownVectors() {
        withBothImplementations { implementation in knownVectors(implementation) }
    }

    func knownVectors(_ implementation: String) {
        XCTAssertEqual(SHA256.hex(of: [UInt8]()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", implementation)
        XCTAssertEqual(SHA256.hex(of: Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", implementation)
        XCTAssertEqual(SHA256.hex(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", implementation)
        XCTAssertEqual(SHA256.hex(of: [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)),
                       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", implementation)
    }

    func testAgreesWithSha256sumForEverySplitOfTheInput() throws {
        let dir = makeTemporaryDirectory(self)
        try withBothImplementations { implementation in try agreesWithSha256sum(dir, implementation) }
    }

    func agreesWithSha256sum(_ dir: String, _ implementation: String) throws {
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 1000, 4097, 100_003] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let file = dir + "/input-\(length)"
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            let sum = try runProgram("/usr/bin/sha256sum", [file])
            let expected = String(sum.output.prefix(64))
            XCTAssertEqual(SHA256.hex(of: bytes), expected, "\(length) bytes at once, \(implementation)")
            for split in Set([0, 1, length / 3, length / 2, max(0, length - 1), length]) where split <= length {
                var hasher = SHA256()
                hasher.update(bytes[..<split])
                hasher.update(bytes[split...])
                XCTAssertEqual(SHA256.hex(hasher.finish()), expected, "\(length) bytes split at \(split), \(implementation)")
            }
        }
    }
}
