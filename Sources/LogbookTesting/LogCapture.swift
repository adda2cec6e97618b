import Logbook
// For LocalizedError only: test frameworks show an error's localizedDescription, which without it
// is Foundation's generic text ("The operation could not be completed…"), not the entries.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Captures log entries for a test: a private bundle in memory (a temporary directory on tmpfs,
/// `/dev/shm` where it exists), removed when the capture goes away. What a test asserts on is what
/// the reader decodes from the real record format, for Logbook's loggers and swift-log alike.
///
/// ```swift
/// import LogbookTesting
///
/// func testRetryIsLogged() throws {
///     let capture = try LogCapture()
///     let client = Client(logger: try capture.logger("net"))
///     client.fetch()
///     let entry = try capture.expect(.warning, logger: "net", containing: "retrying")
///     XCTAssertEqual(entry.arguments.first, .signed(3, .int))
/// }
/// ```
///
/// For swift-log code, make its logger with the capture's bundle:
/// `Logging.Logger(label: "net") { LogbookLogHandler(label: $0, bundle: capture.bundle) }`.
/// The capture applies no `LOGBOOK_FILTER`, so a developer's environment cannot change a test.
public final class LogCapture: @unchecked Sendable {
    /// The bundle entries are captured in.
    public let bundle: LogBundle
    /// Its directory (removed at deinit).
    public let path: String
    /// The reader and what it read so far: one thread at a time (a capture shared by tests that
    /// run in parallel is read from several threads at once).
    private let state: Locked<(reader: LogReader, held: [LogEntry], read: UInt64)>

    /// - Parameters:
    ///   - filter: runtime filter rules for the capture's loggers.
    ///   - capacity: ring bytes; a test that logs more than this keeps the newest entries.
    public init(filter: LogFilter = LogFilter(), capacity: Int = 4 << 20) throws {
        let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp")
        var template = Array("\(base)/logcapture-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw LogbookError(subject: .file, operation: "mkdtemp", path: base, errno: errno)
        }
        path = String(cString: made) + "/capture.logbook"
        bundle = try LogBundle(
            path: path, capacity: capacity, chunkSize: 16 << 10, filter: filter, applyEnvironmentFilter: false)
        state = Locked((try LogReader(path: path), [], 0))
    }

    deinit {
        try? bundle.close()
        let directory = String(path.dropLast("/capture.logbook".count))
        for name in ["ring", "meta", "lock", "durable"] { unlink(path + "/" + name) }
        rmdir(path)
        rmdir(directory)
    }

    /// The capture's logger with this name.
    public func logger(_ name: String) throws -> Logger { try bundle.logger(name) }

    /// Every entry logged since the capture began (or since ``removeAll()``), in time order.
    public func entries() throws -> [LogEntry] {
        try state.withLock { state in
            try Self.readPending(&state)
            return state.held
        }
    }

    private static func readPending(_ state: inout (reader: LogReader, held: [LogEntry], read: UInt64)) throws {
        let new = try state.reader.readNew()
        state.read += UInt64(new.count)
        state.held.append(contentsOf: new)
    }

    /// Entries the ring overwrote before the capture could read them (it keeps the newest
    /// `capacity` bytes): what the bundle counted as written, less what was read. An expectation
    /// that fails says how many.
    public var overwrittenEntries: UInt64 {
        let written = bundle.counters.records  // first: what is logged meanwhile is read, not counted
        let read = (try? state.withLock { state in
            try Self.readPending(&state)
            return state.read
        }) ?? written
        return written > read ? written - read : 0
    }

    /// The captured entries that match every given condition (see ``expect(_:logger:message:containing:metadata:)``).
    public func entries(
        _ level: LogLevel? = nil, logger: String? = nil, message: String? = nil, containing: String? = nil,
        metadata: KeyValuePairs<String, String> = [:]
    ) throws -> [LogEntry] {
        try entries().filter { entry in
            (level == nil || entry.level == level) && (logger == nil || entry.logger == logger)
                && (message == nil || entry.message == message)
                && (containing.map { entry.message.contains($0) } ?? true)
                && metadata.allSatisfy { entry.metadata[$0.key]?.description == $0.value }
        }
    }

    /// The one captured entry that matches every given condition; throws ``LogExpectationFailure``
    /// (listing what was captured) when none or several match.
    /// - Parameters:
    ///   - level: the entry's level (`nil`, as every condition: any).
    ///   - logger: the entry's logger name (a swift-log label).
    ///   - message: the whole rendered message.
    ///   - containing: a part of the rendered message.
    ///   - metadata: keys whose values render as the given text (`"status": "200"`), from native
    ///     calls (`metadata:`) and swift-log alike.
    @discardableResult
    public func expect(
        _ level: LogLevel? = nil, logger: String? = nil, message: String? = nil, containing: String? = nil,
        metadata: KeyValuePairs<String, String> = [:]
    ) throws -> LogEntry {
        let matches = try entries(level, logger: logger, message: message, containing: containing, metadata: metadata)
        if matches.count == 1 { return matches[0] }
        throw LogExpectationFailure(
            expected: Self.describe(level, logger, message, containing, metadata), matches: matches.count,
            captured: try entries(), overwritten: overwrittenEntries)
    }

    /// Throws ``LogExpectationFailure`` when a captured entry matches every given condition.
    public func expectNone(
        _ level: LogLevel? = nil, logger: String? = nil, message: String? = nil, containing: String? = nil,
        metadata: KeyValuePairs<String, String> = [:]
    ) throws {
        let matches = try entries(level, logger: logger, message: message, containing: containing, metadata: metadata)
        if matches.isEmpty { return }
        throw LogExpectationFailure(
            expected: "no entry with " + Self.describe(level, logger, message, containing, metadata),
            matches: matches.count, captured: try entries(), overwritten: overwrittenEntries)
    }

    /// Forgets the entries captured so far; later calls see only newer ones.
    public func removeAll() throws {
        try state.withLock { state in
            try Self.readPending(&state)
            state.held.removeAll()
        }
    }

    private static func describe(
        _ level: LogLevel?, _ logger: String?, _ message: String?, _ containing: String?,
        _ metadata: KeyValuePairs<String, String>
    ) -> String {
        var parts: [String] = []
        if let level { parts.append("level \(level)") }
        if let logger { parts.append("logger \"\(logger)\"") }
        if let message { parts.append("message \"\(message)\"") }
        if let containing { parts.append("message containing \"\(containing)\"") }
        for (key, value) in metadata { parts.append("metadata \(key)=\(value)") }
        return parts.isEmpty ? "any entry" : parts.joined(separator: ", ")
    }
}

/// A ``LogCapture`` expectation that did not hold; its description lists the captured entries,
/// and so does its `localizedDescription`, which is what test frameworks show of a thrown error.
public struct LogExpectationFailure: Error, CustomStringConvertible, LocalizedError {
    /// What was expected.
    public var expected: String
    /// How many entries matched.
    public var matches: Int
    /// Everything that was captured.
    public var captured: [LogEntry]
    /// Entries the capture's ring overwrote before they were read (see ``LogCapture/init(filter:capacity:)``).
    public var overwritten: UInt64 = 0

    public var description: String {
        let found = matches == 0 ? "no entry matched" : "\(matches) entries matched"
        var text = "expected \(expected); \(found). Captured \(captured.count)"
        if overwritten > 0 {
            text += " (and \(overwritten) older ones the ring overwrote: give LogCapture a larger capacity)"
        }
        text += ":"
        for entry in captured.prefix(50) { text += "\n  " + entry.textLine().dropFirst(31) }
        if captured.count > 50 { text += "\n  ... \(captured.count - 50) more" }
        return text
    }

    /// The ``description``: what was expected and every entry captured.
    public var errorDescription: String? { description }
}
