import CLogbookCache
import Foundation
import Logbook

/// A persistent queue of app-defined messages in one file of a fixed size: append from any thread,
/// read them back in append order after a relaunch, drop what was handled. WORK IN PROGRESS (issue
/// 13; docs/CACHE-PLAN.md). The C layer is `logbook_cache.h`.
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
        var options = lb_cache_options()
        lb_cache_options_init(&options)
        options.maximum_bytes = UInt64(max(0, maximumBytes))
        options.overwrite = shouldOverwriteOldMessages ? 1 : 0
        options.durability = durability == .power ? LB_CACHE_DURABLE_POWER.rawValue : LB_CACHE_DURABLE_PROCESS.rawValue
        options.maximum_count = UInt64(max(0, maximumCount ?? 0))
        if let maximumAge {
            let (seconds, attoseconds) = maximumAge.components
            options.maximum_age_ns = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds / 1_000_000_000))
        }
        var opened: OpaquePointer?
        let rc = lb_cache_open(file, &options, &opened)
        try check(rc, "lb_cache_open", path: file, detailed: true)
        guard let opened else { throw LogbookError(operation: "lb_cache_open", path: file, errno: EIO) }
        path = file
        cache = opened
        self.encoding = encoding
    }

    deinit { lb_cache_close(cache) }

    /// Appends one message (encoded with the cache's encoding). Throws `EMSGSIZE` for a message
    /// that cannot fit even in an empty cache, `ENOSPC` when full and not overwriting.
    public func append(message: Message) throws {
        try append(bytes: try encoding.encode(message))
    }

    /// Appends raw bytes; returns the message's sequence number (for ``remove(through:)``).
    @discardableResult
    public func append(bytes: [UInt8]) throws(LogbookError) -> UInt64 {
        var sequence: UInt64 = 0
        let rc = bytes.withUnsafeBytes { lb_cache_append(cache, $0.baseAddress, $0.count, &sequence) }
        if rc != 0 {
            let detail: String? = switch -rc {
            case EMSGSIZE: "the message (\(bytes.count) bytes) cannot fit even in an empty cache"
            case ENOSPC: "the cache is full and does not overwrite old messages"
            default: nil
            }
            throw LogbookError(operation: "lb_cache_append", path: path, errno: -rc, detail: detail)
        }
        return sequence
    }

    /// Every message, oldest first.
    public func messages() throws -> [Message] {
        var result: [Message] = []
        try forEach { result.append(try encoding.decode($0.bytes)) }
        return result
    }

    /// Each message's bytes and sequence, oldest first, without loading them all.
    public func forEach(_ body: (CachedBytes) throws -> Void) throws {
        var reader: OpaquePointer?
        let rc = lb_cache_reader_open(path, &reader)
        guard rc == 0, let reader else { throw LogbookError(operation: "lb_cache_reader_open", path: path, errno: -rc) }
        defer { lb_cache_reader_close(reader) }
        var message = lb_cache_message()
        while true {
            let next = lb_cache_reader_next(reader, &message)
            if next < 0 { throw LogbookError(operation: "lb_cache_reader_next", path: path, errno: -next) }
            if next == 0 { break }
            let bytes = Array(UnsafeBufferPointer(start: message.bytes, count: Int(message.length)))
            try body(CachedBytes(sequence: message.sequence, wallNanoseconds: message.wall_ns, bytes: bytes))
        }
    }

    /// Removes every message up to and including `sequence` (handled by the caller).
    public func remove(through sequence: UInt64) throws(LogbookError) {
        let rc = lb_cache_remove_through(cache, sequence)
        if rc != 0 { throw LogbookError(operation: "lb_cache_remove_through", path: path, errno: -rc) }
    }

    public var statistics: lb_cache_stats {
        var stats = lb_cache_stats()
        lb_cache_stats_get(cache, &stats)
        return stats
    }

    public var count: Int { Int(statistics.messages) }
    public var isEmpty: Bool { count == 0 }
}

/// One message as stored.
public struct CachedBytes: Sendable {
    public var sequence: UInt64
    public var wallNanoseconds: Int64
    public var bytes: [UInt8]
}

/// How messages become bytes: JSON by default (as the reference), or your own.
public struct MessageEncoding<Message: Codable>: Sendable {
    public var encode: @Sendable (Message) throws -> [UInt8]
    public var decode: @Sendable ([UInt8]) throws -> Message

    public init(encode: @escaping @Sendable (Message) throws -> [UInt8], decode: @escaping @Sendable ([UInt8]) throws -> Message) {
        self.encode = encode
        self.decode = decode
    }

    public static var json: MessageEncoding {
        MessageEncoding(encode: { Array(try JSONEncoder().encode($0)) },
                        decode: { try JSONDecoder().decode(Message.self, from: Data($0)) })
    }
}
