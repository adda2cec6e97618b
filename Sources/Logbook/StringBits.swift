/// What the two 64-bit words of a `String` say, on platforms where their layout is the one checked
/// below (64-bit Linux): a small string (at most 15 bytes of UTF-8) holds its bytes in the words
/// themselves, and an immortal string (a literal, or a small string) has bytes that never move or
/// change. Used where the logging path would otherwise borrow a string's bytes or compare its text:
/// metadata keys and the swift-log backend's call-site identity. Every use falls back to the
/// `String` API when `isUsable` is false.
@usableFromInline
package enum StringBits {
    /// Whether the layout holds here: checked once on a literal, small strings (ASCII and not,
    /// empty, 15 bytes) and a heap string.
    @usableFromInline package static let isUsable: Bool = {
        guard MemoryLayout<String>.size == 16 else { return false }
        func check(_ text: String, small: Bool, immortal: Bool) -> Bool {
            let (low, high) = unsafeBitCast(text, to: (UInt64, UInt64).self)
            guard (high >> 63 == 1) == immortal, (high >> 61 & 1 == 1) == small else { return false }
            guard small else { return true }
            let bytes = withUnsafeBytes(of: (low, high)) { Array($0.prefix(Int(high >> 56 & 0xF))) }
            return bytes == Array(text.utf8)
        }
        var heap = String(repeating: "x", count: 40)
        heap.append("y")
        return check("a literal that is longer than fifteen bytes", small: false, immortal: true)
            && check("status", small: true, immortal: true) && check("caf\u{E9}", small: true, immortal: true)
            && check("", small: true, immortal: true) && check("fifteen bytes!!", small: true, immortal: true)
            && check(String(decoding: [0x61, 0x62], as: UTF8.self), small: true, immortal: true)
            && check(heap, small: false, immortal: false)
    }()

    /// The string's words, when it is immortal: a literal or a small string. Equal words then mean
    /// the same bytes (a literal's words hold the address and length of constant text).
    @inlinable @inline(__always)
    package static func immortalWords(_ text: String) -> (UInt64, UInt64)? {
        guard isUsable else { return nil }
        let words = unsafeBitCast(text, to: (UInt64, UInt64).self)
        return words.1 >> 63 == 1 ? words : nil
    }

    /// The string's words, when it is small: its UTF-8 is their first `byteCount(of:)` bytes in
    /// memory order.
    @inlinable @inline(__always)
    package static func smallWords(_ text: String) -> (UInt64, UInt64)? { smallWords(text, usable: isUsable) }

    /// `smallWords(_:)`, with `isUsable` read by the caller (once for many strings: each read is a
    /// call).
    @inlinable @inline(__always)
    package static func smallWords(_ text: String, usable: Bool) -> (UInt64, UInt64)? {
        guard usable else { return nil }
        let words = unsafeBitCast(text, to: (UInt64, UInt64).self)
        return words.1 >> 61 & 0b101 == 0b101 ? words : nil
    }

    @inlinable @inline(__always)
    package static func byteCount(ofSmall words: (UInt64, UInt64)) -> Int { Int(truncatingIfNeeded: words.1 >> 56 & 0xF) }

    /// Whether two strings are equal, as `==` says: two small ASCII strings are equal exactly when
    /// their words are (ASCII has one spelling per text), which spares `==`'s comparison call;
    /// anything else is compared by `==`.
    @inlinable @inline(__always)
    package static func equal(_ a: String, _ b: String) -> Bool { equal(a, b, usable: isUsable) }

    /// `equal(_:_:)`, with `isUsable` read by the caller.
    @inlinable @inline(__always)
    package static func equal(_ a: String, _ b: String, usable: Bool) -> Bool {
        if usable {
            let x = unsafeBitCast(a, to: (UInt64, UInt64).self), y = unsafeBitCast(b, to: (UInt64, UInt64).self)
            if x == y { return true }
            if x.1 >> 60 == 0xE && y.1 >> 60 == 0xE { return false }
        }
        return a == b
    }
}
