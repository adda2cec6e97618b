import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
import CLogbook
import LogbookTesting

/// Metadata and errors in the record format, written through the C API as any writer could, and
/// the reader's checks of their structure.
final class MetadataFormatTests: XCTestCase {
    /// Writes one record at a site with template "m {}": one Int argument, then whatever `tail` puts.
    func write(_ capture: LogCapture, _ tail: (UnsafeMutablePointer<lb_writer>) -> Void) throws {
        let logger = try capture.logger("c")
        let bundle = capture.bundle.cBundle
        let writer = lb_writer_get(bundle)!
        lb_record_begin(writer, logger.cLogger.pointee.id, UInt8(LB_LEVEL_INFO.rawValue))
        lb_record_put_int(writer, 5)
        tail(writer)
        let site = lb_site_register_c(bundle, "c.c", 1, "f", "m {}")
        XCTAssertEqual(lb_record_commit(writer, site), 0)
    }

    func putString(_ writer: UnsafeMutablePointer<lb_writer>, _ text: String) {
        text.writeLogArgument(to: writer)
    }

    func testNestedMetadataAndErrorFromCDecode() throws {
        let capture = try LogCapture()
        try write(capture) { w in
            lb_record_put_container(w, UInt8(LB_ARG_METADATA.rawValue), 2)
            self.putString(w, "z")
            lb_record_put_container(w, UInt8(LB_ARG_LIST.rawValue), 3)
            lb_record_put_u8(w, 1)
            lb_record_put_container(w, UInt8(LB_ARG_MAP.rawValue), 0)
            lb_record_put_container(w, UInt8(LB_ARG_LIST.rawValue), 1)
            lb_record_put_f32(w, 0.5)
            self.putString(w, "a")
            lb_record_put_redacted(w, UInt8(LB_ARG_STRING.rawValue))
            lb_record_put_container(w, UInt8(LB_ARG_ERROR.rawValue), 2)
            self.putString(w, "E")
            self.putString(w, "broke")
        }
        let entry = try capture.expect(message: "m 5")
        XCTAssertEqual(entry.arguments, [.signed(5, .int)])
        XCTAssertEqual(entry.metadata.map(\.key), ["a", "z"])
        XCTAssertEqual(entry.metadata["a"], .value(.redacted(.string)))
        XCTAssertEqual(entry.metadata["z"]?.description, "[1, {}, [0.5]]")
        XCTAssertEqual(entry.error, LoggedError(type: "E", description: "broke"))
        XCTAssertTrue(entry.jsonLine().contains(#""metadata":{"a":null,"z":[1,{},[0.5]]},"error":{"type":"E","description":"broke"}"#), entry.jsonLine())
    }

    func testMalformedStructureIsReportedAsCorruptNeverTrusted() throws {
        let cases: [(String, (UnsafeMutablePointer<lb_writer>) -> Void)] = [
            ("count past the end", { w in lb_record_put_container(w, UInt8(LB_ARG_METADATA.rawValue), 1_000_000) }),
            ("key that is not a string", { w in
                lb_record_put_container(w, UInt8(LB_ARG_METADATA.rawValue), 1)
                lb_record_put_int(w, 1)
                lb_record_put_int(w, 2)
            }),
            ("metadata twice", { w in
                lb_record_put_container(w, UInt8(LB_ARG_METADATA.rawValue), 0)
                lb_record_put_container(w, UInt8(LB_ARG_METADATA.rawValue), 0)
            }),
            ("argument after metadata", { w in
                lb_record_put_container(w, UInt8(LB_ARG_METADATA.rawValue), 0)
                lb_record_put_int(w, 1)
            }),
            ("error of three strings", { w in
                lb_record_put_container(w, UInt8(LB_ARG_ERROR.rawValue), 3)
                for _ in 0..<3 { self.putString(w, "x") }
            }),
            ("list as a message argument", { w in lb_record_put_container(w, UInt8(LB_ARG_LIST.rawValue), 0) }),
            ("nesting too deep", { w in
                lb_record_put_container(w, UInt8(LB_ARG_METADATA.rawValue), 1)
                self.putString(w, "k")
                for _ in 0..<LB_ARG_MAX_DEPTH { lb_record_put_container(w, UInt8(LB_ARG_LIST.rawValue), 1) }
                lb_record_put_int(w, 1)
            }),
        ]
        for (name, tail) in cases {
            let capture = try LogCapture()
            try write(capture, tail)
            try write(capture) { _ in }  // a good record after the bad one
            let reader = try LogReader(path: capture.path)
            let entries = try reader.readAll()
            XCTAssertEqual(entries.map(\.message), ["m 5"], name)
            XCTAssertEqual(reader.issues.map(\.kind), [.corrupt], name)
        }
    }

    func testNativeLoggerRecordsItsModuleAsSource() throws {
        let capture = try LogCapture()
        try capture.logger("native").info("x \(1)")
        let entry = try capture.expect(logger: "native", message: "x 1")
        XCTAssertEqual(entry.source, "LogbookTests")
        XCTAssertTrue(entry.metadata.isEmpty)
        XCTAssertTrue(entry.jsonLine().contains(#","metadata":{},"source":"LogbookTests","#), entry.jsonLine())
    }

    func testCaptureExpectationsExplainWhatWasCaptured() throws {
        let capture = try LogCapture()
        let net = try capture.logger("net")
        net.info("one \(1)")
        net.info("one \(2)")
        XCTAssertThrowsError(try capture.expect(containing: "one")) { error in
            let text = String(describing: error)
            XCTAssertTrue(text.hasPrefix("expected message containing \"one\"; 2 entries matched. Captured 2:\n  info     net: one 1"), text)
        }
        XCTAssertThrowsError(try capture.expect(.error)) { error in
            XCTAssertTrue(String(describing: error).hasPrefix("expected level error; no entry matched."))
        }
        XCTAssertThrowsError(try capture.expectNone(logger: "net"))
        try capture.removeAll()
        XCTAssertEqual(try capture.entries().count, 0)
        net.notice("two")
        try capture.expect(.notice, logger: "net", message: "two")
    }

    func testCaptureRemovesItsBundle() throws {
        var capture: LogCapture? = try LogCapture()
        let path = capture!.path
        try capture!.logger("x").info("y")
        capture = nil
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: (path as NSString).deletingLastPathComponent))
    }
}
