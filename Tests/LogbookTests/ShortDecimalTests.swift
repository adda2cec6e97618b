import CLogbook
import CLogbookTestSupport
import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook

/// The short-decimal path of the record renderer writes exactly what `Double.description` does.
final class ShortDecimalTests: XCTestCase {
    func text(_ value: Double) -> String? {
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 64)
        defer { buffer.deallocate() }
        var cursor = LineCursor(buffer)
        guard cursor.putShortDecimal(value) else { return nil }
        return String(decoding: UnsafeBufferPointer(start: buffer, count: cursor.pointer - buffer), as: UTF8.self)
    }

    func testShortDecimalsMatchDescription() {
        var random = SplitMix64(state: 42)
        var handled = 0, checked = 0, mismatches: [String] = []
        func check(_ value: Double) {
            checked += 1
            guard let fast = text(value) else { return }
            handled += 1
            if fast != value.description, mismatches.count < 10 { mismatches.append("\(value.description) written as \(fast)") }
        }
        let fixed: [Double] = [0, 1, -1, 0.1, 0.2, 0.3, 12.25, 1500, 0.0001, 0.00011, 999_999_999_999_999, 1e15 - 0.5,
                               123456.7, 0.1 + 0.2, 1.0 / 3, 2.5e-4, 4503599627370496.5, 3.14159265]
        fixed.forEach { check($0); check(-$0) }
        for _ in 0..<300_000 {
            let integer = Double(random.next() % 10_000_000_000)
            let k = Int(random.next() % 9)
            var scale = 1.0
            for _ in 0..<k { scale *= 10 }
            check(integer / scale)                                   // decimals of up to 8 places
            check(Double(bitPattern: random.next() >> 2 | 0x3F00_0000_0000_0000))  // arbitrary bits
            check(Double(Int64(bitPattern: random.next()) % 1_000_000) * 0.25)
        }
        XCTAssertTrue(mismatches.isEmpty, mismatches.joined(separator: "\n"))
        XCTAssertGreaterThan(handled, checked / 3, "the fast path takes the common decimals")
    }
}
