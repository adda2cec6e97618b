import CLogbook
import CLogbookQuery
import Logbook
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// SQL over the typed records of bundles, archive directories and archive files: SQLite's engine
/// over Logbook's streaming reader (logbook_query.h), with the tables `records`, `sites` and
/// `record`, and `percentile(value, p)` from `ValueHistogram` (LogbookStatistics).
///
/// ```swift
/// let query = try LogQuery(sources: ["/var/log/app.logbook"])
/// try query.run("SELECT template, count(*), percentile(arg1, 99) FROM records GROUP BY site") { row in
///     print(row.values)
/// }
/// ```
///
/// A query only reads: a statement that writes, attaches a database, runs a PRAGMA or loads an
/// extension is refused (``QueryError/refused(_:)``). Conditions on `time`, `level`, `logger`, `site`,
/// `template`, `file` and `function` are decided by the reader before a record is decoded. Not
/// `Sendable`: use one from one thread at a time.
public final class LogQuery {
    /// The paths read, in the order their records come.
    public let sources: [String]
    let host: QueryHost
    let raw: OpaquePointer

    /// Opens a query over `sources`. Throws a `LogbookError` naming the path for a source that is
    /// missing or is nothing Logbook reads (as `LogReader(path:)` does); a damaged one opens,
    /// its damage reported in ``issues`` once read.
    public init(sources: [String]) throws {
        precondition(!sources.isEmpty, "LogQuery needs at least one source")
        guard sources.count <= 127 else {
            throw QueryError.invalid(message: "at most 127 sources in one query, not \(sources.count)", offset: nil)
        }
        for path in sources { _ = try LogReader(path: path) }
        self.sources = sources
        host = QueryHost(sources: sources)
        var query: OpaquePointer?
        var table = host.table()
        let rc = lb_query_open(&table, &query)
        guard rc == 0, let query else {
            throw QueryError.engine(String(cString: lb_error_detail()))
        }
        raw = query
        sqlite3_create_function_v2(lb_query_database(raw), "percentile", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nil,
                                   nil, percentileStep, percentileFinal, nil)
    }

    deinit { lb_query_close(raw) }

    /// The columns of `records` (and `record`), in order.
    public static let recordColumns: [String] =
        ["time", "time_text", "level", "severity", "logger", "message", "template", "file", "line", "function",
         "thread", "pid", "session", "site", "metadata", "error_type", "error_message", "args", "source"]
        + (1...16).map { "arg\($0)" }

    /// Follow mode: each run of a statement reads, from each source, only the records new since
    /// the last run (a statement that reads `records` once, with no aggregate: ``isStreamable(_:)``).
    public var follow: Bool = false {
        didSet { lb_query_set_follow(raw, follow ? 1 : 0) }
    }

    /// What happened at a followed source's path since the last call of ``followedSourceChanges()``.
    public enum SourceChange: Sendable, Equatable {
        /// The bundle is gone from its path (the query waits for one to be made there).
        case removed(source: String)
        /// The same bundle is at its path again (it was moved away and back).
        case back(source: String)
        /// Another bundle was made at the path: the next run reads it from its beginning (what the
        /// old one held was read).
        case replaced(source: String)
    }

    private var removedSources: Set<Int> = []

    /// Follow mode: checks each followed source's bundle is still the one read (as `show --follow`
    /// does after each poll), and turns to a bundle made again at its path.
    public func followedSourceChanges() -> [SourceChange] {
        var changes: [SourceChange] = []
        for (index, path) in sources.enumerated() {
            guard let reader = host.lastOpened[index], let identity = try? reader.bundleIdentity() else { continue }
            switch identity {
            case .same:
                if removedSources.remove(index) != nil { changes.append(.back(source: path)) }
            case .removed:
                if removedSources.insert(index).inserted { changes.append(.removed(source: path)) }
            case .replaced:
                guard let next = try? LogReader(path: path), (try? next.bundleIdentity()) == .same,
                    lb_query_refollow(raw, index) == 0
                else { continue }
                removedSources.remove(index)
                changes.append(.replaced(source: path))
            }
        }
        return changes
    }

    /// Records the reader decoded since the query was opened: one a pushed-down condition rejected
    /// (on time, level, logger, site, template, file or function) is never decoded, and not counted.
    public var recordsDecoded: UInt64 { lb_query_records_decoded(raw) }

    /// What the reads so far found wrong with the sources (as `LogReader.issues`, with what
    /// `LogReader.verify()` adds after a whole read), each once.
    public var issues: [LogIssue] { host.issues }

    /// Records a source's bundle counted that no read of it found (missing archive files, chunks or
    /// records: `VerifySummary.recordsLost`), summed over the sources.
    public var recordsMissing: UInt64 { host.recordsMissing.values.reduce(0, +) }

    /// The sources whose reads found damage or missing records, in the order given.
    public var damagedSources: [String] { sources.filter(host.failingSources.contains) }

    /// Records the overwrite policy destroyed before a followed read reached them (``follow``):
    /// the readers' `LogReader.overwrittenRecords`, summed.
    public var recordsOverwritten: UInt64 { host.readers.values.reduce(0) { $0 + $1.overwrittenRecords } }

    /// Runs one statement and calls `body` with each row as it comes (memory: what the statement
    /// itself keeps, such as its groups or a sort).
    public func run(_ sql: String, _ body: (QueryRow) throws -> Void) throws {
        if follow, try !isStreamable(sql) {
            throw QueryError.invalid(
                message: "a followed query reads records once, as they come: no aggregate, ORDER BY or second scan",
                offset: nil)
        }
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        let count = Int(sqlite3_column_count(statement))
        let columns = (0..<count).map { String(cString: sqlite3_column_name(statement, Int32($0))) }
        let names = QueryRow.Columns(columns)
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw failure(sql, code: rc) }
            var values: [QueryValue] = []
            values.reserveCapacity(count)
            for index in 0..<Int32(count) { values.append(QueryValue(statement, index)) }
            try body(QueryRow(columns: names, values: values))
        }
    }

    /// Runs one statement and returns its rows.
    public func rows(_ sql: String) throws -> [QueryRow] {
        var rows: [QueryRow] = []
        try run(sql) { rows.append($0) }
        return rows
    }

    /// The names of the columns a statement returns (checks it, reads nothing).
    public func columns(_ sql: String) throws -> [String] {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        return (0..<sqlite3_column_count(statement)).map { String(cString: sqlite3_column_name(statement, $0)) }
    }

    /// Whether a statement returns its rows as records come, so that ``follow`` can run it again and
    /// again: one scan of one table, and no aggregate, window function, sort, DISTINCT, UNION or
    /// LIMIT (each would answer for one run's records only).
    public func isStreamable(_ sql: String) throws -> Bool {
        let statement = try prepare("EXPLAIN " + sql)
        defer { sqlite3_finalize(statement) }
        var scans = 0
        while sqlite3_step(statement) == SQLITE_ROW {
            guard let op = sqlite3_column_text(statement, 1) else { continue }
            let name = String(cString: op)
            // Aggregates and sorts answer for a whole run; DISTINCT and UNION (an ephemeral table)
            // only within a run; LIMIT would drop what each run has beyond it.
            if name.hasPrefix("Agg") || name.hasPrefix("Sorter") || name == "OpenEphemeral" || name == "DecrJumpZero"
                || name == "OffsetLimit"
            {
                return false
            }
            if name == "VFilter" { scans += 1 }
        }
        // One scan of one table: a second scan of `records` in follow mode would read only what
        // is new since the first; none would answer the same at every run.
        guard scans == 1 else { return false }
        // And that scan is of `records`, with nothing joined to it by UNION ALL.
        let plan = try prepare("EXPLAIN QUERY PLAN " + sql)
        defer { sqlite3_finalize(plan) }
        while sqlite3_step(plan) == SQLITE_ROW {
            guard let detail = sqlite3_column_text(plan, 3) else { continue }
            let text = String(cString: detail)
            if text.contains("COMPOUND") || text.contains("UNION") || (text.hasPrefix("SCAN ") && !text.hasPrefix("SCAN records")) {
                return false
            }
        }
        return true
    }

    /// A SQL condition over the columns of `records` (`level >= 'warning' AND arg1 > 250`), to test
    /// records a caller reads itself (`LogReader.stream(where:_:)`) one at a time.
    public func condition(_ expression: String) throws -> RecordCondition {
        let prefix = "SELECT 1 FROM record WHERE (\n"   // the newlines end a trailing -- comment
        do {
            return RecordCondition(query: self, statement: try prepare(prefix + expression + "\n)"))
        } catch QueryError.invalid(let message, let offset?) {
            // The position in the condition, not in the statement made around it.
            let inside = offset - prefix.utf8.count
            throw QueryError.invalid(message: message, offset: inside >= 0 && inside <= expression.utf8.count ? inside : nil)
        }
    }

    func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        let db = lb_query_database(raw)
        let rc = sql.withCString { text in
            let rc = sqlite3_prepare_v3(db, text, -1, 0, &statement, &tail)
            // What follows the statement may be blanks, semicolons and comments, nothing else.
            while rc == SQLITE_OK, let rest = tail, rest.pointee != 0 {
                var next: OpaquePointer?
                let more = sqlite3_prepare_v3(db, rest, -1, 0, &next, &tail)
                if next != nil || more != SQLITE_OK {
                    sqlite3_finalize(next)
                    return SQLITE_MISUSE
                }
                if tail == rest { break }
            }
            return rc
        }
        if rc == SQLITE_MISUSE {
            sqlite3_finalize(statement)
            throw QueryError.invalid(message: "one statement at a time: the SQL goes on after the first", offset: nil)
        }
        if rc == SQLITE_OK && statement == nil {
            throw QueryError.invalid(message: "no SQL statement (only blanks, semicolons or comments)", offset: nil)
        }
        guard rc == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            let error = failure(sql, code: rc)
            // A statement known not to read (ANALYZE, BEGIN, REINDEX of a name SQLite cannot find)
            // is refused by what it is: that says more than the authorizer's refusal or SQLite's error.
            if lb_query_check_reading(raw, sql) == -EPERM, let refusal = lb_query_refusal(raw) {
                throw QueryError.refused(String(cString: refusal))
            }
            throw error
        }
        // What the statement is, by its first word: REINDEX, ANALYZE, BEGIN or SAVEPOINT may touch
        // nothing the authorizer is asked about, and some of them count as read-only for SQLite.
        if lb_query_check_reading(raw, sqlite3_sql(statement)) != 0 {
            sqlite3_finalize(statement)
            throw QueryError.refused(lb_query_refusal(raw).map { String(cString: $0) } ?? "anything but reading")
        }
        guard sqlite3_stmt_readonly(statement) != 0 else {
            sqlite3_finalize(statement)
            throw QueryError.refused("anything but reading")
        }
        // A level compared as text (max(level) >= 'error', ifnull(level, '') > 'info') would be a
        // wrong answer: refused, with how to write it (logbook_query.h, lb_query_check_levels).
        if sqlite3_stmt_isexplain(statement) == 0, let text = sqlite3_sql(statement) {
            let rc = lb_query_check_levels(raw, text)
            if rc != 0 {
                sqlite3_finalize(statement)
                throw QueryError.invalid(message: String(cString: lb_error_detail()), offset: nil)
            }
        }
        return statement
    }

    /// The error of the last call on the database, with the position in `sql` SQLite names.
    func failure(_ sql: String, code: Int32) -> QueryError {
        let db = lb_query_database(raw)
        let message = String(cString: sqlite3_errmsg(db))
        if code == SQLITE_AUTH || message == "not authorized", let refusal = lb_query_refusal(raw) {
            return .refused(String(cString: refusal))
        }
        let offset = Int(sqlite3_error_offset(db))
        return .invalid(message: message, offset: offset >= 0 ? offset : nil)
    }
}

/// A prepared condition of ``LogQuery/condition(_:)``.
public final class RecordCondition {
    let query: LogQuery
    let statement: OpaquePointer

    init(query: LogQuery, statement: OpaquePointer) {
        self.query = query
        self.statement = statement
    }

    deinit { sqlite3_finalize(statement) }

    /// Whether `record` satisfies the condition (NULL is false, as in a WHERE clause).
    public func matches(_ record: LogRecord) throws -> Bool {
        query.host.current = record.logReader
        lb_query_set_record(query.raw, record.rawReader, record.rawEntry)
        defer {
            sqlite3_reset(statement)
            lb_query_set_record(query.raw, nil, nil)
            query.host.current = nil
        }
        let rc = sqlite3_step(statement)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        throw query.failure("", code: rc)
    }
}

/// What a query could not do.
public enum QueryError: Error, CustomStringConvertible, Equatable {
    /// SQL that SQLite rejects, or a read that failed: its message and the byte offset in the SQL
    /// it points at (when SQLite names one).
    case invalid(message: String, offset: Int?)
    /// A statement that asks for more than reading: a write, ATTACH, PRAGMA, load_extension,
    /// REINDEX, ANALYZE, VACUUM, a transaction (BEGIN, SAVEPOINT, ...).
    case refused(String)
    /// SQLite could not be set up.
    case engine(String)

    public var description: String {
        switch self {
        case .invalid(let message, let offset):
            offset.map { "\(message) (at byte \($0) of the SQL)" } ?? message
        case .refused(let what): "refused: \(what); a query only reads records"
        case .engine(let why): why
        }
    }
}

/// One value of a row, with SQLite's type.
public enum QueryValue: Sendable, Equatable, CustomStringConvertible {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    init(_ statement: OpaquePointer, _ index: Int32) {
        switch sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER: self = .integer(sqlite3_column_int64(statement, index))
        case SQLITE_FLOAT: self = .real(sqlite3_column_double(statement, index))
        case SQLITE_TEXT:
            let count = Int(sqlite3_column_bytes(statement, index))
            let bytes = UnsafeRawPointer(sqlite3_column_text(statement, index))
            self = .text(bytes.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: count), as: UTF8.self) } ?? "")
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, index))
            let bytes = sqlite3_column_blob(statement, index)
            self = .blob(bytes.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? [])
        default: self = .null
        }
    }

    /// As the table output shows it: NULL as empty, a real in the fewest digits that read back.
    public var description: String {
        switch self {
        case .null: ""
        case .integer(let value): String(value)
        case .real(let value): value.description
        case .text(let value): value
        case .blob(let value): "x'" + value.map { String($0, radix: 16).leftPadded(to: 2) }.joined() + "'"
        }
    }
}

extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

/// One row: its values in column order, and the columns' names.
public struct QueryRow: Sendable {
    final class Columns: Sendable {
        let names: [String]
        init(_ names: [String]) { self.names = names }
    }
    let columns: Columns
    public let values: [QueryValue]

    /// The columns' names, as the statement names them.
    public var columnNames: [String] { columns.names }

    /// The value of the first column of that name, or nil when there is none.
    public subscript(_ name: String) -> QueryValue? {
        columns.names.firstIndex(of: name).map { values[$0] }
    }
}
