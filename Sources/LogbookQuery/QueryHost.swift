import CLogbook
import CLogbookQuery
import Logbook
import LogbookStatistics
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the C tables ask of Swift (lb_query_host): a ``LogReader`` for each scan of a source (so
/// that messages render as ``LogReader`` renders them, and issues are read as `show` reads them),
/// and the message of an entry. Called on the thread that runs the statement.
final class QueryHost {
    let sources: [String]
    let names: [UnsafeMutablePointer<CChar>]
    /// The readers the tables are reading, by their C reader.
    var readers: [OpaquePointer: LogReader] = [:]
    /// The issues of readers given back, each once, in the order found.
    private(set) var issues: [LogIssue] = []
    private var issuesSeen: Set<String> = []
    /// The `record` table's reader when a host reads records itself (``LogQuery/matches(_:)``).
    var current: LogReader?
    var message: [UInt8] = []
    /// The reader opened last for each source: in follow mode, the one kept between scans.
    var lastOpened: [Int: LogReader] = [:]

    init(sources: [String]) {
        self.sources = sources
        names = sources.map { strdup($0)! }
    }

    deinit { names.forEach { free($0) } }

    func table() -> lb_query_host {
        lb_query_host(
            context: Unmanaged.passUnretained(self).toOpaque(), source_count: sources.count,
            source_name: { context, index in
                UnsafePointer(QueryHost.from(context).names[index])
            },
            open_reader: { context, index, out in
                let host = QueryHost.from(context)
                do {
                    let reader = try LogReader(path: host.sources[index])
                    host.readers[reader.raw] = reader
                    host.lastOpened[index] = reader
                    out?.pointee = reader.raw
                    return 0
                } catch let error as LogbookError {
                    return -error.errno
                } catch {
                    return -EIO
                }
            },
            close_reader: { context, index, raw in
                guard let raw else { return }
                let host = QueryHost.from(context)
                if let reader = host.readers.removeValue(forKey: raw) {
                    host.take(reader)
                    if host.lastOpened[index] === reader { host.lastOpened[index] = nil }
                }
            },
            message: { context, raw, entry, length in
                guard let raw, let entry else { return nil }
                let host = QueryHost.from(context)
                guard let reader = host.readers[raw] ?? host.current.flatMap({ $0.raw == raw ? $0 : nil }) else { return nil }
                host.message.removeAll(keepingCapacity: true)
                host.message.append(contentsOf: LogRecord(borrowing: entry, of: reader).message.utf8)
                host.message.append(0)
                length?.pointee = host.message.count - 1
                return host.message.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self) }
            })
    }

    /// Records the sources' bundles counted that no read found (``VerifySummary/recordsLost``),
    /// the largest of any one read of each source.
    private(set) var recordsMissing: [String: UInt64] = [:]
    /// The sources whose reads found damage or missing records.
    private(set) var failingSources: Set<String> = []

    /// Keeps what a reader found, with what `verify` adds once it has read everything (a scan reads
    /// to the end even when its statement stopped early): missing archive files, chunks, records.
    func take(_ reader: LogReader) {
        if let summary = try? reader.verify(), summary.recordsLost > 0 {
            recordsMissing[reader.path] = max(recordsMissing[reader.path] ?? 0, summary.recordsLost)
        }
        for issue in reader.issues where issuesSeen.insert("\(reader.path)\u{0}\(issue)").inserted {
            issues.append(issue)
            if issue.isFailure { failingSources.insert(reader.path) }
        }
        if recordsMissing[reader.path] != nil { failingSources.insert(reader.path) }
    }

    static func from(_ context: UnsafeMutableRawPointer?) -> QueryHost {
        Unmanaged<QueryHost>.fromOpaque(context!).takeUnretainedValue()
    }
}

// MARK: - percentile(value, p)

/// The aggregate's state: one histogram, as ``LogStatistics`` keeps per argument.
final class PercentileState {
    var histogram = ValueHistogram()
    var percentile: Double?
}

/// `percentile(x, p)`: the nearest-rank p-th percentile (0...100) of the numbers among x (NULL
/// and text are skipped), from the same ``ValueHistogram`` as `logbook stats` (within
/// ``ValueHistogram/relativeAccuracy``); NULL when there are none.
let percentileStep: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = { context, _, argv in
    guard let context, let argv, let value = argv[0], let p = argv[1] else { return }
    guard let slot = sqlite3_aggregate_context(context, Int32(MemoryLayout<UnsafeMutableRawPointer>.size)) else {
        return sqlite3_result_error_nomem(context)
    }
    let pointer = slot.assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
    if pointer.pointee == nil { pointer.pointee = Unmanaged.passRetained(PercentileState()).toOpaque() }
    // Borrowed, not retained and released once per row.
    Unmanaged<PercentileState>.fromOpaque(pointer.pointee!)._withUnsafeGuaranteedRef { state in
        percentileRecord(context, state, value, p)
    }
}

func percentileRecord(_ context: OpaquePointer, _ state: PercentileState, _ value: OpaquePointer, _ p: OpaquePointer) {
    if state.percentile == nil {
        guard [SQLITE_INTEGER, SQLITE_FLOAT].contains(sqlite3_value_numeric_type(p)) else {
            return sqlite3_result_error(context, "percentile(value, p): p is a number from 0 to 100", -1)
        }
        let wanted = sqlite3_value_double(p)
        guard wanted >= 0, wanted <= 100 else {
            return sqlite3_result_error(context, "percentile(value, p): p is a number from 0 to 100", -1)
        }
        state.percentile = wanted
    }
    switch sqlite3_value_numeric_type(value) {
    case SQLITE_INTEGER: state.histogram.record(sqlite3_value_int64(value))
    case SQLITE_FLOAT: state.histogram.record(sqlite3_value_double(value))
    default: break
    }
}

let percentileFinal: @convention(c) (OpaquePointer?) -> Void = { context in
    guard let context else { return }
    guard let slot = sqlite3_aggregate_context(context, 0),
        let stored = slot.assumingMemoryBound(to: UnsafeMutableRawPointer?.self).pointee
    else { return sqlite3_result_null(context) }
    let state = Unmanaged<PercentileState>.fromOpaque(stored).takeRetainedValue()
    if let p = state.percentile, let value = state.histogram.value(atPercentile: p) {
        sqlite3_result_double(context, value)
    } else {
        sqlite3_result_null(context)
    }
}
