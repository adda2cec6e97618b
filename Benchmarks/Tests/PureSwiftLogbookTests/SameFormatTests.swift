import Logbook
import PureSwiftLogbook
import XCTest

/// The pure-Swift write path must write the bytes the C core writes: the normal reader reads them.
final class SameFormatTests: XCTestCase {
    func testReaderReadsWhatThePureSwiftPathWrote() throws {
        let path = "/tmp/logbook-pure-swift-\(getpid()).logbook"
        defer { _ = try? FileManager.default.removeItem(atPath: path) }
        let bundle = try PureSwiftBundle(path: path, capacity: 1 << 20, chunkSize: 16 << 10)
        try bundle.register(logger: 1, name: "pure", site: 1, template: "request {} took {} ms ok={}")
        var writer = PureSwiftWriter(bundle: bundle)
        for i in 0..<5000 { writer.log(site: 1, logger: 1, level: 3, id: i, ms: Double(i) / 4, ok: i % 2 == 0) }
        writer.seal()

        let reader = try LogReader(path: path)
        let entries = try reader.readAll()
        XCTAssertEqual(reader.issues.count, 0, "\(reader.issues)")
        XCTAssertEqual(entries.count, 5000)
        XCTAssertEqual(entries[3].message, "request 3 took 0.75 ms ok=false")
        XCTAssertEqual(entries[3].logger, "pure")
        XCTAssertEqual(entries[3].level, .info)
        XCTAssertEqual(entries.last?.arguments, [.signed(4999, .int), .double(1249.75), .bool(false)])
        let info = try reader.info()
        XCTAssertEqual(info.chunkSize, 16 << 10)
        XCTAssertEqual(info.sessions.first?.clock, "monotonic")
    }
}
