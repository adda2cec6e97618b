import CLogbook
import CLogbookUpload
import Foundation
import Logbook
import LogbookTestKit
import XCTest
@testable import LogbookUpload

/// Connections cut mid-body while an uploader sends: the upload resumes at the server's offset.
final class ResumableUploadConcurrencyTests: XCTestCase, ResumableUploadTestCase {
    /// Every connection is cut after 3 MB: each attempt after the first asks the server's offset
    /// (HEAD) and sends only the rest (PATCH). 24 MiB arrive whole, once, and the 9 attempts that
    /// each moved it forward do not exhaust a policy of 4 (an uploader that started over would never
    /// get past 3 MB). What a cut wastes is what the server had read but not stored when it cut,
    /// which depends on the machine's speed: the bound on the bytes sent is by construction, at
    /// most one cut connection's bytes per attempt beyond the file (it was 20% more than the file,
    /// and a loaded machine went past it once).
    func testConnectionsCutMidBodyResumeAtTheServersOffset() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try ResumableUploadServer(directory: dir + "/server", cutAfter: 3_000_000)
        let size = 24 << 20
        let digest = try randomFile(dir + "/big.bin", bytes: size, seed: 7)
        let url = "http://127.0.0.1:\(server.port)/files/big"
        // At most 4 attempts: each cut leaves the upload further, so none counts against them.
        let uploader = try Uploader(.init(spool: dir + "/spool", policy: RetryPolicy(maxDelay: .zero, maxAttempts: 4)) { _ in
            DeliveryRequest(method: "PUT", url: url)
        })
        let item = try uploader.submit(file: dir + "/big.bin")
        let outcome = await firstOutcome(of: uploader)
        guard case .delivered(let id, let attempts) = outcome else { return XCTFail("\(String(describing: outcome))") }
        XCTAssertEqual(id, item.id)
        XCTAssertGreaterThanOrEqual(attempts, size / 3_000_000, "every cut costs an attempt")
        XCTAssertEqual(server.completed.map(\.bytes), [size], "one upload, complete")
        XCTAssertEqual(try sha256(ofFile: server.stored("/files/big")), digest, "byte-exact")
        let most = size + (attempts - 1) * (3_000_000 + 1 << 20)  // a cut connection, and a read buffer
        XCTAssertLessThanOrEqual(server.received, most, "sent in all")
        let statistics = uploader.statistics
        XCTAssertGreaterThanOrEqual(statistics.bytesSent, size)
        XCTAssertLessThanOrEqual(statistics.bytesSent, most)
        XCTAssertEqual(statistics.inFlight, [])
    }
}
