import CLogbook
import CLogbookUpload
import Foundation
import Logbook
import LogbookTestKit
import XCTest
@testable import LogbookUpload

/// What `ResumableUploadTests` and `ResumableUploadConcurrencyTests` share.
protocol ResumableUploadTestCase: XCTestCase {}

extension ResumableUploadTestCase {
    func randomFile(_ path: String, bytes: Int, seed: UInt64) throws -> String {
        var generator = SplitMix64(state: seed)
        var data = [UInt8](repeating: 0, count: bytes)
        data.withUnsafeMutableBytes { buffer in
            let words = buffer.bindMemory(to: UInt64.self)
            for i in words.indices { words[i] = generator.next() }
        }
        try Data(data).write(to: URL(fileURLWithPath: path))
        return SHA256.hex(of: data)
    }

    func sha256(ofFile path: String) throws -> String {
        try Spool.contentIdentifier(ofFile: path)
    }

    /// Starts `uploader`, waits for its first outcome, and stops it.
    func firstOutcome(of uploader: Uploader) async -> Uploader.Outcome? {
        uploader.start()
        var outcome: Uploader.Outcome?
        for await next in uploader.outcomes {
            outcome = next
            break
        }
        await uploader.stop()
        return outcome
    }
}
