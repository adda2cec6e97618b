import CLogbook
import Foundation
import LogbookTestKit
import XCTest
import Logbook
import Logging
import LogbookExport
import LogbookMetrics
import LogbookUpload
import Metrics
import MetricsTestKit
import ServiceLifecycle

/// The writer's own view of its ring (`LogBundle.ringUsage`, C `lb_bundle_ring_usage`): chunks by
/// state, and the bytes they hold.
final class RingUsageTests: XCTestCase {
    func testChunksMoveFromFreeToActiveToSealedAndBytesAddUp() throws {
        let path = makeTemporaryDirectory(self) + "/usage.logbook"
        let bundle = try LogBundle(path: path, capacity: 16 * 4096, chunkSize: 4096, idleSealMilliseconds: 0)
        var usage = bundle.ringUsage
        XCTAssertEqual(usage.chunkSize, 4096)
        XCTAssertEqual(usage.chunkCount, 16)
        XCTAssertEqual(usage.capacity, 16 * 4096)
        XCTAssertEqual(usage.freeChunks, 16)
        XCTAssertEqual(usage.bytesInUse, 0)
        let log = try bundle.logger("app")
        for i in 0..<10 { log.info("record \(i)") }
        usage = bundle.ringUsage
        XCTAssertEqual([usage.freeChunks, usage.activeChunks, usage.sealedChunks], [15, 1, 0])
        let header = Int(LB_CHUNK_HEADER_SIZE)
        XCTAssertEqual(usage.bytesInUse, header + Int(bundle.counters.bytes), "one chunk: its header and the records")
        // 200 records of ~40 bytes fill a few chunks; flushing seals the last one.
        for i in 0..<200 { log.info("another record \(i)") }
        try bundle.flush()
        usage = bundle.ringUsage
        let used = usage.chunkCount - usage.freeChunks
        XCTAssertGreaterThan(used, 1)
        XCTAssertEqual(usage.activeChunks, 0)
        XCTAssertEqual(usage.sealedChunks, used)
        XCTAssertEqual(usage.archivingChunks + usage.archivedChunks, 0, "no archiver")
        XCTAssertEqual(usage.bytesInUse, used * header + Int(bundle.counters.bytes))
        try bundle.close()
        XCTAssertEqual(bundle.ringUsage, usage, "readable after close, and close changed nothing sealed")
    }

    func testArchivedChunksAreCounted() throws {
        let dir = makeTemporaryDirectory(self)
        let bundle = try LogBundle(path: dir + "/app.logbook", capacity: 16 * 4096, chunkSize: 4096,
                                   archive: ArchiveOptions(directory: dir + "/archive"))
        let log = try bundle.logger("app")
        for i in 0..<200 { log.info("record \(i)") }
        try bundle.syncArchive()
        let usage = bundle.ringUsage
        XCTAssertEqual(usage.activeChunks + usage.sealedChunks + usage.archivingChunks, 0)
        XCTAssertEqual(usage.archivedChunks, Int(bundle.counters.chunksClaimed))
        XCTAssertEqual(usage.freeChunks + usage.archivedChunks, usage.chunkCount)
        try bundle.close()
    }
}
