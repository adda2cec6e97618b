import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
@testable import LogbookUpload

/// What `UploaderFailureTests` and `UploaderFailureConcurrencyTests` share.
protocol UploaderFailureTestCase: XCTestCase {}

extension UploaderFailureTestCase {
    func request(_ url: URL) -> @Sendable (SpooledItem) -> DeliveryRequest {
        { _ in
            DeliveryRequest(method: "PUT", url: (url).absoluteString)
        }
    }

    /// Items named by their content (`names`), spooled by an uploader that never sends and is gone
    /// before this returns: their ids, in order.
    func spoolItems(_ names: [String], in spool: String, server: UploadServer) throws -> [String] {
        let uploader = try Uploader(.init(spool: spool, isAllowed: false, makeRequest: request(server.url("/ok"))))
        return try names.map { try uploader.submit(data: Array($0.utf8)).id }
    }

    /// The first `count` outcomes (fewer if they do not come within `seconds`: a failsafe against
    /// a hang, far longer than any of them takes on a loaded machine; the tests compare the list).
    func outcomes(_ uploader: Uploader, count: Int, within seconds: Double = 120) async -> [Uploader.Outcome] {
        await withTaskGroup(of: [Uploader.Outcome].self) { group in
            group.addTask {
                var seen: [Uploader.Outcome] = []
                for await outcome in uploader.outcomes {
                    seen.append(outcome)
                    if seen.count == count { break }
                }
                return seen
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return []
            }
            var result: [Uploader.Outcome] = []
            for await part in group {
                result = part
                break
            }
            group.cancelAll()
            return result
        }
    }
}
