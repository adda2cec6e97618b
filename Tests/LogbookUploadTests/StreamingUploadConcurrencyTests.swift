import CLogbook
import CLogbookUpload
import Foundation
import Logbook
import LogbookTestKit
import XCTest
@testable import LogbookUpload

/// Bodies streamed from the spool: a linked file, progress within an item.
final class StreamingUploadConcurrencyTests: XCTestCase {
    /// A linked file (`submit(file:linking: true)`, the CLI's --link) deleted after its submission
    /// is still delivered whole (the link keeps it); one edited in place in its last byte is given
    /// up, and the server never gets its body whole.
    func testALinkedFileDeletedIsDeliveredAndOneEditedInPlaceNeverArrivesWhole() async throws {
        let dir = makeTemporaryDirectory(self)
        let server = try UploadServer(directory: dir, keepsBodies: true)
        let url = server.url("/ok").absoluteString
        let uploader = try Uploader(.init(spool: dir + "/spool", isAllowed: false) { _ in DeliveryRequest(url: url) })
        let deleted = dir + "/deleted.bin", edited = dir + "/edited.bin"
        let content = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try Data(content).write(to: URL(fileURLWithPath: deleted))
        try Data(content.reversed()).write(to: URL(fileURLWithPath: edited))
        let kept = try uploader.submit(file: deleted, linking: true)
        let changed = try uploader.submit(file: edited, linking: true)
        try FileManager.default.removeItem(atPath: deleted)
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: edited))
        try handle.seek(toOffset: UInt64(content.count - 1))
        try handle.write(contentsOf: Data([content[0] &+ 1]))
        try handle.close()
        uploader.isAllowed = true
        uploader.start()
        var seen: [Uploader.Outcome] = []
        for await outcome in uploader.outcomes {
            seen.append(outcome)
            if seen.count == 2 { break }
        }
        await uploader.stop()
        XCTAssertTrue(seen.contains(.delivered(id: kept.id, attempts: 1)), "\(seen)")
        XCTAssertTrue(seen.contains { outcome in
            guard case .gaveUp(changed.id, let reason) = outcome else { return false }
            return reason.hasPrefix("the file changed after it was submitted") && reason.contains("another SHA-256")
        }, "\(seen)")
        XCTAssertEqual(try Array(Data(contentsOf: URL(fileURLWithPath: server.bodies + "/" + kept.id))), content)
        XCTAssertFalse(FileManager.default.fileExists(atPath: server.bodies + "/" + changed.id), "never whole under its key")
        XCTAssertEqual(server.requests().filter { ($0["answer"] as? Int) == 201 }.count, 1)
        // Its owner's file, changed by its owner: given up, not kept (quarantine would hold a link to it).
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/spool/quarantine/\(changed.id).data"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/spool/\(changed.id).data"))
    }

    /// While an item uploads, `statistics.inFlight` says how far it came and at what rate, and
    /// `bytesSent` counts what was sent.
    ///
    /// The server stops reading halfway until the test has seen 4 MiB done: the upload cannot
    /// end before the test looks, however long a loaded machine keeps the test from looking.
    func testProgressWithinAnItem() async throws {
        let dir = makeTemporaryDirectory(self)
        let size = 16 << 20
        let server = try ResumableUploadServer(directory: dir + "/server", rate: 4_000_000, holdAfter: size / 2)
        try Data((0..<size).map { UInt8(truncatingIfNeeded: $0) }).write(to: URL(fileURLWithPath: dir + "/f.bin"))
        let url = "http://127.0.0.1:\(server.port)/files/f"
        let uploader = try Uploader(.init(spool: dir + "/spool") { _ in DeliveryRequest(url: url) })
        let item = try uploader.submit(file: dir + "/f.bin")
        uploader.start()
        var samples: [Uploader.Transfer] = []
        let progressed = await eventually {
            if let transfer = uploader.statistics.inFlight.first { samples.append(transfer) }
            return (samples.last?.bytesDone ?? 0) >= 4 << 20
        }
        XCTAssertTrue(progressed, "progress within the item")
        server.release()
        for await outcome in uploader.outcomes {
            XCTAssertEqual(outcome, .delivered(id: item.id, attempts: 1))
            break
        }
        await uploader.stop()
        XCTAssertTrue(samples.allSatisfy { $0.id == item.id && $0.byteCount == size && $0.bytesDone <= size })
        XCTAssertEqual(samples.map(\.bytesDone), samples.map(\.bytesDone).sorted(), "it only grows")
        XCTAssertGreaterThan(samples.last?.bytesPerSecond ?? 0, 0)
        XCTAssertGreaterThanOrEqual(uploader.statistics.bytesSent, size)
        XCTAssertEqual(uploader.statistics.inFlight, [])
    }

    /// A task cancelled while its exchange waits on a server that never answers ends with
    /// ECANCELED (not the 60 s timeout), and the interim 104 of a resumable server reaches its
    /// handler before the final answer.
    func testAnExchangeIsCancelledAtOnceAndInterimAnswersAreHandedOver() async throws {
        let dir = makeTemporaryDirectory(self)
        let plain = try UploadServer(directory: dir)
        let transport = HTTPTransport()
        let stallURL = plain.url("/stall/x").absoluteString
        let stalled = Task {
            await transport.send(DeliveryRequest(method: "PUT", url: stallURL), body: .bytes([1, 2, 3]), timeout: .seconds(60))
        }
        let arrived = await eventually { plain.arrivals() == 1 }
        XCTAssertTrue(arrived)
        stalled.cancel()
        guard case .failure(let failure) = await stalled.value else { return XCTFail("an answer from a stalled server") }
        XCTAssertEqual(failure.code, ECANCELED, failure.words)

        let resumable = try ResumableUploadServer(directory: dir + "/server")
        let interims = Locked<[(Int, String?)]>([])
        var request = DeliveryRequest(method: "POST", url: "http://127.0.0.1:\(resumable.port)/files/y")
        request.setHeader("Upload-Draft-Interop-Version", "6")
        request.setHeader("Upload-Complete", "?1")
        let answer = await transport.send(request, body: .bytes(Array(repeating: 9, count: 100_000)), timeout: .seconds(60)) { status, headers in
            interims.withLock { $0.append((status, headers.first { $0.name.lowercased() == "location" }?.value)) }
        }
        guard case .success(let final) = answer else { return XCTFail("\(answer)") }
        XCTAssertEqual(final.status, 201)
        let seen = interims.withLock { $0 }
        XCTAssertEqual(seen.map(\.0), [104])
        XCTAssertTrue(seen.first?.1?.hasPrefix("http://127.0.0.1:\(resumable.port)/resumable_upload/") == true, "\(seen)")
        XCTAssertEqual(resumable.completed.map(\.bytes), [100_000])
    }
}
