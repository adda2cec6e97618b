import CLogbook
import Synchronization

/// What a log call records of an error, found once per error type: the type's name
/// (`String(reflecting:)` demangles, which takes microseconds), kept as UTF-8 to be copied into
/// records as it is, and how to describe a value of the type the way `String(describing:)` does
/// without its dynamic casts (three protocol lookups per call, most of what an `error:` cost).
///
/// A value is described from its address: a log call with a concrete error type passes the
/// value's own (no `any Error` box, no allocation), one with an `any Error` the address inside the
/// box. A `CustomStringConvertible` type is described through the conformance found once, at
/// registration. A plain value type of at most 8 bytes without a description or mirror of its own
/// (an enum of cases, a struct of a code) is described by reflection once per value: its
/// descriptions are kept by its bytes (256 per type at most).
@usableFromInline
final class ErrorType: @unchecked Sendable {
    /// The type's identity (its metadata's address): what the table finds it by.
    let key: UInt
    let name: String
    /// `name`'s UTF-8. An `ErrorType` lives as long as the program (its table keeps it).
    let nameUTF8: UnsafeBufferPointer<UInt8>
    /// Describes the value of this type at the address.
    let describeValue: (UnsafeRawPointer) -> String

    private init(key: UInt, name: String, describeValue: @escaping (UnsafeRawPointer) -> String) {
        self.key = key
        self.name = name
        self.describeValue = describeValue
        let bytes = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, name.utf8.count))
        _ = bytes.initialize(from: name.utf8)
        nameUTF8 = UnsafeBufferPointer(rebasing: UnsafeBufferPointer(bytes)[..<name.utf8.count])
    }

    deinit { UnsafeMutableRawPointer(mutating: nameUTF8.baseAddress)?.deallocate() }

    /// Calls `body` with the type of the value in `error`'s box and the value's address. A box
    /// whose value is itself an `any Error` (generic code that converted a `T` that was
    /// `any Error`) is opened again: `type(of:)` looks through it, so the type and the address
    /// must both be the innermost value's.
    static func withValue<R>(in error: any Error, _ body: (ErrorType, UnsafeRawPointer) -> R) -> R {
        func open<Boxed: Error>(_ boxed: Boxed) -> R {
            if Boxed.self == (any Error).self { return withValue(in: unsafeBitCast(boxed, to: (any Error).self), body) }
            let errorType = of(Swift.type(of: boxed))
            return withUnsafePointer(to: boxed) { body(errorType, UnsafeRawPointer($0)) }
        }
        return open(error)
    }

    /// Appends the error (the type's name and `description`) to the record being built: the last
    /// part of a record (logbook_format.h). `value` is the address of a value of this type.
    @usableFromInline
    func write(valueAt value: UnsafeRawPointer, to writer: UnsafeMutablePointer<lb_writer>) {
        lb_record_put_container(writer, UInt8(LB_ARG_ERROR.rawValue), 2)
        lb_record_put_data(writer, LogArgumentType.string.rawValue, nameUTF8.baseAddress, nameUTF8.count)
        describeValue(value).writeLogArgument(to: writer)
    }

    @usableFromInline
    static func of(_ type: any Error.Type) -> ErrorType {
        let key = UInt(bitPattern: ObjectIdentifier(type))
        if let table = UnsafeRawPointer(bitPattern: published.load(ordering: .acquiring)),
           let found = Unmanaged<Table>.fromOpaque(table)._withUnsafeGuaranteedRef({ $0.find(key) })
        {
            return found
        }
        var name = String(reflecting: type)
        while let start = name.firstRange(of: "(unknown context at "),
              let end = name[start.upperBound...].firstRange(of: ").") {
            name.removeSubrange(start.lowerBound..<end.upperBound)
        }
        let made = ErrorType(key: key, name: name, describeValue: describer(type))
        return tables.withLock { tables in
            if let known = tables.last?.find(key) { return known }
            let table: Table
            if let current = tables.last, (current.count + 1) * 2 <= current.capacity {
                table = current
            } else {
                table = Table(capacity: max(64, (tables.last?.capacity ?? 0) * 2))
                tables.last?.forEach { table.insert($0) }
                tables.append(table)
            }
            table.insert(Unmanaged.passRetained(made))  // lives as long as the program
            published.store(UInt(bitPattern: Unmanaged.passUnretained(table).toOpaque()), ordering: .releasing)
            return made
        }
    }

    /// The types seen so far: open addressing on the type's address (no hashing of a dictionary
    /// key), one atomic word per slot (0, or an `ErrorType`'s address). A log call reads the
    /// published table without a lock. A new type is added in place, its slot stored after the
    /// entry is complete; a table that would be more than half full is copied into one twice as
    /// large, which is published instead. Older tables stay alive (`tables`: a reader may still be
    /// in one); together they are smaller than the newest, which has fewer than four slots per
    /// type (64 at least).
    private final class Table: @unchecked Sendable {
        let capacity: Int
        private let slots: UnsafeMutablePointer<Atomic<UInt>>
        /// Entries; changed under `tables`' lock only.
        private(set) var count = 0

        init(capacity: Int) {
            self.capacity = capacity
            slots = .allocate(capacity: capacity)
            for slot in 0..<capacity { (slots + slot).initialize(to: Atomic(0)) }
        }

        deinit {
            slots.deinitialize(count: capacity)
            slots.deallocate()
        }

        func find(_ key: UInt) -> ErrorType? {
            let mask = capacity - 1
            var slot = Int(truncatingIfNeeded: key >> 4) & mask
            while true {
                guard let entry = UnsafeRawPointer(bitPattern: slots[slot].load(ordering: .acquiring)) else { return nil }
                let errorType = Unmanaged<ErrorType>.fromOpaque(entry)
                if errorType._withUnsafeGuaranteedRef({ $0.key == key }) { return errorType.takeUnretainedValue() }
                slot = (slot + 1) & mask
            }
        }

        /// Adds `entry` (a key not in the table); the caller holds `tables`' lock and keeps the
        /// table at most half full.
        func insert(_ entry: Unmanaged<ErrorType>) {
            let mask = capacity - 1
            var slot = Int(truncatingIfNeeded: entry._withUnsafeGuaranteedRef { $0.key } >> 4) & mask
            while slots[slot].load(ordering: .relaxed) != 0 { slot = (slot + 1) & mask }
            count += 1
            slots[slot].store(UInt(bitPattern: entry.toOpaque()), ordering: .releasing)
        }

        /// Calls `body` with every entry; under `tables`' lock.
        func forEach(_ body: (Unmanaged<ErrorType>) -> Void) {
            for slot in 0..<capacity {
                if let entry = UnsafeRawPointer(bitPattern: slots[slot].load(ordering: .relaxed)) { body(.fromOpaque(entry)) }
            }
        }
    }

    private static let tables = Locked<[Table]>([])
    /// The newest table's address (0: none yet).
    private static let published = Atomic<UInt>(0)

    /// How to describe a value of `type` from its address, in `String(describing:)`'s order:
    /// `TextOutputStreamable`, `CustomStringConvertible`, `CustomDebugStringConvertible`, then
    /// reflection. A class instance boxed as its superclass (`let e: Base = Sub()`, `catch let e as
    /// Base`) is the same reference, read as the subclass it is (`type` is the dynamic type).
    private static func describer(_ type: any Error.Type) -> (UnsafeRawPointer) -> String {
        func make<E: Error>(_: E.Type) -> (UnsafeRawPointer) -> String {
            let plain: (UnsafeRawPointer) -> String = { String(describing: $0.assumingMemoryBound(to: E.self).pointee) }
            if E.self is any TextOutputStreamable.Type { return plain }
            if let convertible = E.self as? any CustomStringConvertible.Type {
                func read<Convertible: CustomStringConvertible>(_: Convertible.Type) -> (UnsafeRawPointer) -> String {
                    { $0.assumingMemoryBound(to: Convertible.self).pointee.description }
                }
                return read(convertible)
            }
            // Reflection of a plain value depends on its bytes alone, unless the type makes its own
            // mirror.
            if E.self is any CustomDebugStringConvertible.Type || E.self is any CustomReflectable.Type || !_isPOD(E.self)
                || MemoryLayout<E>.size > 8
            {
                return plain
            }
            let descriptions = Locked<[UInt64: String]>([:])
            return { value in
                var bits: UInt64 = 0
                withUnsafeMutableBytes(of: &bits) { $0.copyMemory(from: UnsafeRawBufferPointer(start: value, count: MemoryLayout<E>.size)) }
                if let known = descriptions.withLock({ $0[bits] }) { return known }
                let text = plain(value)
                descriptions.withLock { if $0.count < 256 { $0[bits] = text } }
                return text
            }
        }
        return make(type)
    }
}
