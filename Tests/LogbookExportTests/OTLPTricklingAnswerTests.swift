import Foundation
import LogbookTestKit
import XCTest
import LogbookExport
import LogbookUpload

/// Finding 10 of the fourth outside test, on the exporter's side of the one HTTP layer: a
/// collector answering 201 and then a body of one byte every half second held `export --otlp`
/// (each byte was progress). Once the request is sent, the whole answer must come within the
/// timeout: an answer that trickles forever ends the attempt as timed out.
final class OTLPTricklingAnswerTests: XCTestCase {
    func testAnAnswerThatTricklesForeverEndsAtTheTimeout() async throws {
        let server = try UploadServer(directory: makeTemporaryDirectory(self))
        for what in ["body", "head", "interim"] {
            let destination = OTLPDestination(url: server.url("/trickle/" + what), policy: RetryPolicy(maxAttempts: 1),
                                              timeout: .seconds(1))
            let delivery = await withTaskGroup(of: OTLPDestination.Delivery?.self) { group in
                group.addTask { await destination.deliver(Array("a batch".utf8)) }
                group.addTask {  // a failsafe against a hang, never the verdict
                    try? await Task.sleep(for: .seconds(120))
                    return nil
                }
                let first = await group.next()!
                group.cancelAll()
                return first
            }
            XCTAssertEqual(delivery, .gaveUp(attempts: 1, reason: "1 attempts, the last: timed out"), what)
        }
    }
}
