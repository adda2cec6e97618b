import CLogbookTestSupport
import Logbook
import LogbookTestKit

/// The shaped records of the integrity tests (Tests/CLogbookTestSupport/shaped_records.c): each
/// record's size and bytes follow from (thread, sequence), so an altered or mixed-up record is
/// caught value by value.
enum ShapedRecord {
    static let template = "thread {} seq {} text {}"

    /// The (thread, sequence) of an entry that is exactly a shaped record, or nil.
    static func identify(_ entry: LogEntry, chunkSize: Int) -> (thread: UInt32, sequence: UInt64)? {
        guard entry.level == .info, entry.error == nil, entry.arguments.count == 3,
              case .unsigned(let thread, .uint32) = entry.arguments[0],
              case .unsigned(let sequence, .uint64) = entry.arguments[1],
              case .string(let text, isStatic: false) = entry.arguments[2]
        else { return nil }
        var shape = lb_test_shape()
        lb_test_record_shape(UInt32(thread), sequence, UInt32(chunkSize), &shape)
        guard text.utf8.elementsEqual(expectedText(UInt32(thread), sequence, Int(shape.text_length))) else { return nil }
        if shape.metadata != 0 {
            let expected = LogMetadata([
                .init(key: "k", value: .value(.signed(shape.metadata_number, .int64))),
                .init(key: "t", value: .value(.string(
                    String(decoding: expectedText(UInt32(thread), sequence, Int(shape.metadata_text_length)), as: UTF8.self),
                    isStatic: false))),
            ])
            guard entry.metadata == expected else { return nil }
        } else if !entry.metadata.isEmpty {
            return nil
        }
        return (UInt32(thread), sequence)
    }

    static func expectedText(_ thread: UInt32, _ sequence: UInt64, _ length: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            buffer.withMemoryRebound(to: CChar.self) { _ = lb_test_shape_text(thread, sequence, UInt32(length), $0.baseAddress) }
            count = length
        }
    }
}
