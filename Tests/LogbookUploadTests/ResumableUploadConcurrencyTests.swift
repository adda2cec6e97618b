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
    /// (HEAD) and sends only the rest (PATCH). 24 MiB arrive whole, once, with at most 20% more
    /// bytes on the wire than the file holds, and the 9 attempts that each moved it forward do not
    /// exhaust a policy of 4.
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
        XCTAssertLessThanOrEqual(server.received, size * 12 / 10, "sent in all")
        let statistics = uploader.statistics
        XCTAssertGreaterThanOrEqual(statistics.bytesSent, size)
        XCTAssertLessThanOrEqual(statistics.bytesSent, size * 12 / 10)
        XCTAssertEqual(statistics.inFlight, [])
    }
}
