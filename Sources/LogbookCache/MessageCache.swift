import CLogbookCache
import Foundation
import Logbook

/// A persistent queue of app-defined messages in one file of a fixed size: append from any thread,
/// read them back in append order after a relaunch, drop what was handled. The C layer is
/// `logbook_cache.h`; the bytes are in docs/FORMAT.md, "Cache".
///
/// - `maximumBytes` is the whole file. Full, the oldest messages make room
///   (`shouldOverwriteOldMessages`, the default) or `append` throws `ENOSPC`; a message that cannot
///   fit even in an empty cache throws `EMSGSIZE`.
/// - An append is visible to readers in any process as soon as it returns, and survives what its
///   ``Durability`` says.
/// - Any number of threads may append; one process at a time may open the cache (a second one
///   gets `EWOULDBLOCK`); readers (``reader()``, ``messages()``) may be anywhere.
/// - Damage is recovered: a torn last append is invisible, a damaged message is skipped and
///   reported by the reader with its offset, a damaged header is rebuilt from the messages found.
///
/// ```swift
/// let cache = try MessageCache<Event>(file: "/var/lib/app/events.cache", maximumBytes: 1 << 20,
///                                     shouldOverwriteOldMessages: true)
/// try cache.append(message: Event(name: "launch"))
/// for event in try cache.messages() { print(event) }
/// ```
public final class MessageCache<Message: Codable>: @unchecked Sendable {
    /// What an append survives once it returns.
    public enum Durability: Sendable {
        /// `kill -9` and crashes of the app (the data is in the page cache), not power loss.
        case process
        /// Power loss too: the append returns after the data is on stable storage; concurrent
        /// appenders share one sync.
        case power
    }

    public let path: String
    private let cache: OpaquePointer
    private let encoding: MessageEncoding<Message>

    public init(file: String, maximumBytes: Int, shouldOverwriteOldMessages: Bool = true,
                durability: Durability = .process, maximumCount: Int? = nil, maximumAge: Duration? = nil,
                encoding: MessageEncoding<Message> = .json) throws(LogbookError) {
        // A negative size is named as the caller wrote it, not as the 0 it would be clamped to.
        guard maximumBytes >= 0 else {
            throw LogbookError(subject: .cache, operation: "MessageCache.init", path: file, errno: EINVAL,
                               detail: "maximumBytes \(maximumBytes) is negative (the file's whole size, at least 8192)")
        }
        var options = lb_cache_options()
        lb_cache_options_init(&options)
        options.maximum_bytes = UInt64(maximumBytes)
        options.overwrite = shouldOverwriteOldMessages ? 1 : 0
        options.durability = durability == .power ? LB_CACHE_DURABLE_POWER.rawValue : LB_CACHE_DURABLE_PROCESS.rawValue
        if let maximumCount {
            guard maximumCount > 0 else {
                throw LogbookError(subject: .cache, operation: "MessageCache.init", path: file, errno: EINVAL,
                                   detail: "maximumCount \(maximumCount) is not positive (nil means no limit)")
            }
            options.maximum_count = UInt64(maximumCount)
        }
        if let maximumAge {
            guard maximumAge > .zero else {
                throw LogbookError(subject: .cache, operation: "MessageCache.init", path: file, errno: EINVAL,
                                   detail: "maximumAge \(maximumAge) is not positive (nil means no limit)")
            }
            // Nanoseconds, saturating: an age past what 64 bits hold is no limit.
            let (seconds, attoseconds) = maximumAge.components
            let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
            let (sum, carry) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
            options.maximum_age_ns = overflow || carry ? .max : max(1, sum)
        }
        var opened: OpaquePointer?
        let rc = lb_cache_open(file, &options, &opened)
        try check(rc, .cache, "lb_cache_open", path: file, detailed: true)
        guard let opened else { throw LogbookError(subject: .cache, operation: "lb_cache_open", path: file, errno: EIO) }
        path = file
        cache = opened
        self.encoding = encoding
    }

    /// The same, for a file URL (as the reference takes it). Unlike the reference, the file need
    /// not exist: it is created, allocated whole, on first open.
    public convenience init(file: URL, maximumBytes: Int, shouldOverwriteOldMessages: Bool = true,
                            durability: Durability = .process, maximumCount: Int? = nil, maximumAge: Duration? = nil,
                            encoding: MessageEncoding<Message> = .json) throws(LogbookError) {
        try self.init(file: file.path, maximumBytes: maximumBytes, shouldOverwriteOldMessages: shouldOverwriteOldMessages,
                      durability: durability, maximumCount: maximumCount, maximumAge: maximumAge, encoding: encoding)
    }

    deinit { lb_cache_close(cache) }

    /// Appends one message (encoded with the cache's encoding). Throws `EMSGSIZE` for a message
    /// that cannot fit even in an empty cache, `ENOSPC` when full and not overwriting.
    public func append(message: Message) throws {
        try encoding.withEncoded(message) { bytes in try append(raw: bytes) }
    }

    /// Appends raw bytes; returns the message's sequence number (for ``remove(through:)``).
    @discardableResult
    public func append(bytes: [UInt8]) throws(LogbookError) -> UInt64 {
        var sequence: UInt64 = 0
        let rc = bytes.withUnsafeBytes { lb_cache_append(cache, $0.baseAddress, $0.count, &sequence) }
        if rc != 0 { throw appendFailure(rc, bytes: bytes.count) }
        return sequence
    }

    private func append(raw bytes: UnsafeRawBufferPointer) throws(LogbookError) {
        let rc = lb_cache_append(cache, bytes.baseAddress, bytes.count, nil)
        if rc != 0 { throw appendFailure(rc, bytes: bytes.count) }
    }

    private func appendFailure(_ rc: Int32, bytes: Int) -> LogbookError {
        let detail: String? = switch -rc {
        case EMSGSIZE: "the message (\(bytes) bytes) cannot fit even in an empty cache"
        case ENOSPC: "the cache is full and does not overwrite old messages"
        case EBADF: "this process is a fork of the one that opened the cache, which stays its writer"
        default: nil
        }
        return LogbookError(subject: .cache, operation: "lb_cache_append", path: path, errno: -rc, detail: detail)
    }

    /// Every message, oldest first (damaged ones skipped: ``reader()`` reports them): what the
    /// cache held at one moment, also while it is written (the cache is copied whole first).
    public func messages() throws -> [Message] {
        let reader = try CacheReader(file: path, encoding: encoding, copyLimit: nil)
        var copied: [CachedBytes] = []
        while let message = try reader.next() { copied.append(message) }
        return try copied.map { try encoding.decode($0.bytes) }
    }

    /// Each message's bytes and sequence, oldest first, without loading them all (see
    /// ``CacheReader``); returns what was skipped: damage, and messages the writer overwrote
    /// before `body` got to them.
    @discardableResult
    public func forEach(_ body: (CachedBytes) throws -> Void) throws -> [CacheIssue] {
        let reader = try self.reader()
        while let message = try reader.next() { try body(message) }
        return reader.issues
    }

    /// A reader over the messages kept now, oldest first, one at a time; ``CacheReader/issues``
    /// lists what it skipped.
    public func reader() throws(LogbookError) -> CacheReader<Message> {
        try CacheReader(file: path, encoding: encoding)
    }

    /// Removes every message up to and including `sequence` (handled by the caller): the
    /// consumer's cursor, so that an uploader drains the cache without reading it again.
    public func remove(through sequence: UInt64) throws(LogbookError) {
        let rc = lb_cache_remove_through(cache, sequence)
        try check(rc, .cache, "lb_cache_remove_through", path: path)
    }

    /// Makes every append so far survive power loss (what ``Durability/power`` does per append).
    public func sync() throws(LogbookError) {
        let rc = lb_cache_sync(cache)
        try check(rc, .cache, "lb_cache_sync", path: path)
    }

    public var statistics: Statistics {
        var stats = lb_cache_stats()
        lb_cache_stats_get(cache, &stats)
        return Statistics(stats)
    }

    /// What the cache holds and what left it, from its header (so across relaunches).
    public struct Statistics: Sendable, Equatable {
        /// Messages kept, and their bytes (the messages' own, without framing).
        public var messages: Int
        public var messageBytes: Int
        /// The sequence of the oldest message kept, and the one the next append gets.
        public var firstSequence: UInt64
        public var nextSequence: UInt64
        /// Messages that made room for new ones (the byte limit), and those removed by the
        /// count and age limits.
        public var evictedToMakeRoom: Int
        public var evictedByCount: Int
        public var evictedByAge: Int
        /// Messages removed by ``MessageCache/remove(through:)``.
        public var removed: Int
        /// Bytes of the file's region (the file less its 4096-byte header), and in use.
        public var capacityBytes: Int
        public var usedBytes: Int
        /// Times a damaged file was rebuilt from what a scan found, and damaged messages or
        /// regions found (by those rebuilds, and by eviction passing over damage).
        public var rebuilds: Int
        public var damageFound: Int

        /// The counters are the file's header fields: a damaged one that a rebuild did not catch
        /// (a flipped bit) reads as `Int.max` at most, never a trap.
        init(_ s: lb_cache_stats) {
            messages = Int(clamping: s.messages)
            messageBytes = Int(clamping: s.message_bytes)
            firstSequence = s.head_sequence
            nextSequence = s.next_sequence
            evictedToMakeRoom = Int(clamping: s.evicted_overwrite)
            evictedByCount = Int(clamping: s.evicted_count)
            evictedByAge = Int(clamping: s.evicted_age)
            removed = Int(clamping: s.removed)
            capacityBytes = Int(clamping: s.region_size)
            usedBytes = Int(clamping: s.used_bytes)
            rebuilds = Int(clamping: s.rebuilds)
            damageFound = Int(clamping: s.damage_found)
        }
    }

    public var count: Int { statistics.messages }
    public var isEmpty: Bool { count == 0 }
}

/// One message as stored.
public struct CachedBytes: Sendable, Equatable {
    /// Its place in the cache: greater than every message appended before it (one more, but
    /// after a kill during an append or a rebuild from damage, which can leave a gap).
    public var sequence: UInt64
    /// When it was appended (CLOCK_REALTIME, nanoseconds since 1970).
    public var wallNanoseconds: Int64
    public var bytes: [UInt8]
}

/// What a reader skipped: damage (where in the file, how many bytes, what was wrong), or messages
/// the writer removed before the reader reached them (``missedSequences``).
public struct CacheIssue: Sendable, Equatable, CustomStringConvertible {
    public var offset: UInt64
    public var length: UInt64
    public var what: String
    /// The sequences of the messages this reader missed because the writer overwrote them (or a
    /// consumer removed them) before it reached them; nil for damage. A sequence a killed writer
    /// left unused may be among them.
    public var missedSequences: ClosedRange<UInt64>?
    public var description: String {
        guard let missed = missedSequences else { return "at byte \(offset) (\(length) bytes): \(what)" }
        return "\(missed.count) messages (sequences \(missed.lowerBound)...\(missed.upperBound)): \(what)"
    }
}

/// Reads a cache's messages one at a time (from any process, with pread: never a mapping), each
/// checked, oldest first, from the oldest message kept to at least the newest published when it
/// was made. It copies up to 4 MiB at a time (`copyLimit`), and a cache up to that size whole at
/// its first ``next()``: what it returns is then what the cache held at one moment. When a larger
/// cache's writer overwrites messages before this reader reached them (its consumer is slower than
/// the writer), it goes on at the oldest one left and ``issues`` names the sequences it missed.
/// Not for several threads at once.
public final class CacheReader<Message: Codable> {
    public let path: String
    private let reader: OpaquePointer
    private let encoding: MessageEncoding<Message>

    /// `copyLimit`: the most one copy takes, at least 4096 bytes; `nil` copies the whole cache at
    /// once (memory for all of it; ``MessageCache/messages()`` reads so).
    public init(file: String, encoding: MessageEncoding<Message>, copyLimit: Int? = 4 << 20) throws(LogbookError) {
        var opened: OpaquePointer?
        let rc = lb_cache_reader_open(file, &opened)
        try check(rc, .cache, "lb_cache_reader_open", path: file, detailed: true)
        guard let opened else { throw LogbookError(subject: .cache, operation: "lb_cache_reader_open", path: file, errno: EIO) }
        let limit = copyLimit.map { UInt64(max($0, 0)) } ?? UInt64.max
        let set = lb_cache_reader_set_window(opened, limit)
        if set != 0 {
            lb_cache_reader_close(opened)
            throw LogbookError(subject: .cache, operation: "lb_cache_reader_set_window", path: file, errno: -set,
                               detail: "copy limit \(copyLimit.map(String.init) ?? "nil") is under 4096 bytes")
        }
        path = file
        reader = opened
        self.encoding = encoding
    }

    deinit { lb_cache_reader_close(reader) }

    /// The next message's bytes, or nil at the end.
    public func next() throws(LogbookError) -> CachedBytes? {
        var message = lb_cache_message()
        let rc = lb_cache_reader_next(reader, &message)
        try check(rc, .cache, "lb_cache_reader_next", path: path)
        if rc == 0 { return nil }
        let bytes = message.length == 0 ? [] : Array(UnsafeBufferPointer(start: message.bytes, count: Int(message.length)))
        return CachedBytes(sequence: message.sequence, wallNanoseconds: message.wall_ns, bytes: bytes)
    }

    /// The next message decoded, with its sequence, or nil at the end.
    public func nextMessage() throws -> (sequence: UInt64, message: Message)? {
        guard let next = try next() else { return nil }
        return (next.sequence, try encoding.decode(next.bytes))
    }

    /// What was skipped so far: damage (a damaged header, a message failing its checksum, a
    /// truncated file) and messages the writer removed before this reader reached them.
    public var issues: [CacheIssue] {
        (0..<lb_cache_reader_issue_count(reader)).map { index in
            var issue = lb_cache_issue()
            lb_cache_reader_issue(reader, index, &issue)
            let missed = issue.kind == UInt32(LB_CACHE_ISSUE_OVERTAKEN.rawValue) && issue.missed > 0
                ? issue.missed_first...(issue.missed_first &+ issue.missed &- 1) : nil
            return CacheIssue(offset: issue.offset, length: issue.length, what: String(cString: issue.what),
                              missedSequences: missed)
        }
    }
}

/// How messages become bytes: JSON by default (as the reference), the compact binary encoding
/// (``compactBinary``: about half the bytes, several times faster), or your own.
public struct MessageEncoding<Message: Codable>: Sendable {
    public var encode: @Sendable (Message) throws -> [UInt8]
    public var decode: @Sendable ([UInt8]) throws -> Message

    /// Hands the encoded bytes to `body` without copying them into an array first.
    var withEncoded: @Sendable (Message, (UnsafeRawBufferPointer) throws -> Void) throws -> Void

    public init(encode: @escaping @Sendable (Message) throws -> [UInt8], decode: @escaping @Sendable ([UInt8]) throws -> Message) {
        self.encode = encode
        self.decode = decode
        withEncoded = { message, body in try encode(message).withUnsafeBytes(body) }
    }

    /// JSON through Foundation's JSONEncoder and JSONDecoder (one of each, shared: both are
    /// Sendable).
    public static var json: MessageEncoding {
        let encoder = JSONEncoder(), decoder = JSONDecoder()
        var encoding = MessageEncoding(encode: { Array(try encoder.encode($0)) },
                                       decode: { try decoder.decode(Message.self, from: Data($0)) })
        encoding.withEncoded = { message, body in try encoder.encode(message).withUnsafeBytes(body) }
        return encoding
    }

    /// Tagged values with their keys (docs/FORMAT.md, "Compact binary messages"): a type may gain
    /// optional fields and still read its old messages, as with JSON.
    public static var compactBinary: MessageEncoding {
        MessageEncoding(encode: { try CompactBinaryEncoder().encode($0) },
                        decode: { try CompactBinaryDecoder().decode(Message.self, from: $0) })
    }
}
