import ArgumentParser
import Logbook
import LogbookQuery
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

struct Query: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run SQL (SQLite) over the typed records of bundles, archive directories or archive files.",
        discussion: """
            Tables: records (time, time_text, level (a name, compared by severity: level >= 'warning'), \
            severity, logger, message, template, file, line, \
            function, thread, pid, session, site, metadata, error_type, error_message, args, source, \
            arg1 .. arg16; site is a number per call site across sessions: GROUP BY site is the fast grouping), \
            sites (site, template, file, line, function, logger, count); functions \
            percentile(value, p) (nearest rank, within 0.05% as logbook stats), level('warning') and \
            time_ns('2026-11-28T18:00:00Z'). A statement that would compare, sort or take max() of what a \
            function or aggregate made of level as text (HAVING max(level) >= 'error') is refused: write \
            severity, or COLLATE level. A NaN argument is NULL, as SQLite holds none (args says "nan"). \
            Conditions on time, level, logger, site, template, file and \
            function are decided before a record is decoded. Only reading: a statement that does not begin \
            with SELECT, WITH or VALUES (REINDEX, ANALYZE, VACUUM, PRAGMA, BEGIN...) is refused, saying why. Example:
              logbook query app.logbook "SELECT template, count(*), percentile(arg1, 99) FROM records \
            WHERE level >= 'warning' GROUP BY site"
            """)

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("One or more sources, then the SQL statement (which may begin with a -- comment).", valueName: "source... sql"))
    var arguments: [String] = []

    @Flag(help: "One JSON object per row. A column name seen before in the row gets :1, :2... (the first not taken), as SQLite names the columns of a subquery (SELECT 1 AS a, 2 AS a: \"a\" and \"a:1\"); an infinity is the string \"inf\" or \"-inf\", as show --json writes it.")
    var json = false

    @Flag(help: "Comma-separated values (quoted as RFC 4180 says; lines end in LF), a header row first. On a terminal, control and invisible format characters are escaped as in the table (\\u{1b}); to a pipe or a file, values are written exactly as they are.")
    var csv = false

    @Flag(name: [.short, .long], help: "Run the query again on the records new since the last run, until interrupted (SIGINT or SIGTERM, even one its parent ignored; it ends by that signal) (a query without aggregates or ORDER BY).")
    var follow = false

    @Option(help: "Seconds between runs with --follow.")
    var interval: Double = 0.2

    /// The sources and the SQL: `arguments` without the `--` that may end the options (which
    /// `.allUnrecognized` keeps), so that `logbook query app.logbook -- "-- why\nSELECT ..."` still works.
    var positionals: [String] {
        guard let end = arguments.firstIndex(of: "--") else { return arguments }
        var rest = arguments
        rest.remove(at: end)
        return rest
    }

    func validate() throws {
        // The arguments take what looks like an option but is none, so that SQL beginning with a
        // comment (-- ...) needs no `--` before it. A misspelt option is still said as one.
        let positionals = positionals
        let end = arguments.firstIndex(of: "--") ?? arguments.count
        for (index, argument) in arguments[..<end].enumerated() where Self.looksLikeAnOption(argument) {
            let isSQL = index == positionals.count - 1
            if isSQL || access(argument, F_OK) != 0 {
                throw ValidationError("Unknown option '\(escapingControlCharacters(argument))'")
            }
        }
        guard positionals.count >= 2 else { throw ValidationError("logbook query takes one or more sources, then the SQL") }
        guard !(json && csv) else { throw ValidationError("--json and --csv: choose one") }
        try validateInterval(interval)
    }

    /// `-x`, `--name` or `--name=value`: an option's shape, which SQL (`-- a comment` followed by
    /// a statement, `-1`) never has alone.
    static func looksLikeAnOption(_ argument: String) -> Bool {
        guard argument.hasPrefix("-"), argument.count > 1 else { return false }
        let name = argument.drop(while: { $0 == "-" }).prefix(while: { $0 != "=" })
        return argument.prefix(3) != "---" && !name.isEmpty && name.first!.isLetter
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
    }

    func run() throws {
        let sql = positionals.last!
        let sources = Array(positionals.dropLast())
        let query: LogQuery
        do { query = try LogQuery(sources: sources) } catch { fail("\(error)") }
        var printer = RowPrinter(style: json ? .json : csv ? .csv : .table, terminal: isatty(1) == 1)
        do {
            if follow {
                guard try query.isStreamable(sql) else {
                    throw ValidationError("--follow runs a query that returns rows of records as they come: one scan of records, and no aggregate (count, avg, GROUP BY), ORDER BY, DISTINCT, UNION or LIMIT")
                }
                query.follow = true
                signal(SIGPIPE, SIG_IGN)
                TerminationSignals.endOnArrival()  // "until interrupted", also when the parent ignores SIGINT
                var overwrittenSaid: UInt64 = 0
                while true {
                    try query.run(sql) { printer.row($0) }
                    printer.flush()
                    sayIssues(query, sources: sources, once: true)
                    // A follower lapped by the writer says how many records it never saw, as show does.
                    let overwritten = query.recordsOverwritten
                    if overwritten > overwrittenSaid {
                        warn("\(overwritten - overwrittenSaid) records were overwritten before they could be read (\(overwritten) since following began)")
                        overwrittenSaid = overwritten
                    }
                    // A bundle removed, or made again at its path, is said and followed as show does.
                    for change in query.followedSourceChanges() {
                        switch change {
                        case .removed(let source): warn("\(source) was removed; waiting for a bundle to be made there again")
                        case .back(let source): warn("\(source) is back (the same bundle); following it on")
                        case .replaced(let source):
                            warn("\(source) is another bundle now (made again at this path); following it from its start")
                        }
                    }
                    pause(interval)
                }
            }
            try query.run(sql) { printer.row($0) }
            if printer.rowsPrinted == 0, !json { printer.header(try query.columns(sql)) }
            printer.finish()
        } catch let error as QueryError {
            printer.finish()
            if case .invalid(let message, let offset?) = error, offset <= sql.utf8.count {
                // The line of the SQL that SQLite points at, and a caret under the place.
                let bytes = Array(sql.utf8)
                let start = bytes[..<offset].lastIndex(of: 10).map { $0 + 1 } ?? 0
                let end = bytes[offset...].firstIndex(of: 10) ?? bytes.count
                let column = String(decoding: bytes[start..<offset], as: UTF8.self).count
                warn("\(message), at byte \(offset) of the SQL:")
                warn("  " + String(decoding: bytes[start..<end], as: UTF8.self))
                fail("  " + String(repeating: " ", count: column) + "^")
            }
            fail("\(error)")
        } catch {
            printer.finish()
            fail("\(error)")
        }
        sayIssues(query, sources: sources, once: false)
    }

    /// What could not be read is said on stderr, as `show` says it, so that an answer is never
    /// silently partial.
    func sayIssues(_ query: LogQuery, sources: [String], once: Bool) {
        let failures = query.issues.filter(\.isFailure)
        let missing = query.recordsMissing
        guard !failures.isEmpty || missing > 0, !once || !Self.said else { return }
        Self.said = true
        let names = query.damagedSources.joined(separator: " ")
        if !failures.isEmpty {
            let records = failures.reduce(UInt64(0)) { $0 + $1.records }
            let lost = records > 0 ? " (\(records) records unreadable or missing)" : ""
            warn("\(failures.count) problems in \(names)\(lost); run `logbook verify` on it")
        } else {
            warn("\(missing) records are missing from \(names); run `logbook verify` on it")
        }
    }
    nonisolated(unsafe) static var said = false
}

/// Rows as an aligned table (widths from the first 1,000 rows, then streamed), JSON lines or CSV.
/// What reaches a terminal is escaped as everything the CLI prints (`isUnsafeForTerminal`): the
/// table and JSON always (JSON's escapes keep the value exact), CSV when standard output is a
/// terminal (CSV has no escapes: to a pipe or a file its values stay exact, for the program
/// reading them).
struct RowPrinter {
    enum Style { case table, json, csv }
    let style: Style
    /// Standard output is a terminal: CSV escapes as the table does.
    let terminal: Bool
    var output = Output()
    var held: [QueryRow] = []
    var widths: [Int]?
    var rowsPrinted = 0
    var headerDone = false
    /// The JSON keys of the last column names seen (each name once), and those names.
    var jsonKeys: (names: [String], keys: [String]) = ([], [])

    init(style: Style, terminal: Bool = false) {
        self.style = style
        self.terminal = terminal
    }

    mutating func row(_ row: QueryRow) {
        rowsPrinted += 1
        switch style {
        case .json:
            if jsonKeys.names != row.columnNames { jsonKeys = (row.columnNames, Self.uniqueKeys(row.columnNames)) }
            output.line(json(row, keys: jsonKeys.keys))
        case .csv:
            if !headerDone { header(row.columnNames) }
            output.line(row.values.map { csvField($0) }.joined(separator: ","))
        case .table:
            if widths == nil {
                held.append(row)
                if held.count >= 1000 { release() }
            } else {
                tableLine(row.values.map(cell))
            }
        }
    }

    mutating func header(_ names: [String]) {
        headerDone = true
        switch style {
        case .json: break
        case .csv: output.line(names.map { csvField(.text($0)) }.joined(separator: ","))
        case .table:
            let names = names.map(escapingControlCharacters)
            widths = widths ?? names.map(\.count)
            tableLine(names)
        }
    }

    mutating func release() {
        guard let first = held.first else { return }
        var widths = first.columnNames.map { escapingControlCharacters($0).count }
        for row in held { for (index, value) in row.values.enumerated() { widths[index] = max(widths[index], cell(value).count) } }
        self.widths = widths
        if !headerDone { header(first.columnNames) }
        for row in held { tableLine(row.values.map(cell)) }
        held = []
    }

    mutating func flush() {
        if style == .table { release() }
        output.flush()
    }

    mutating func finish() { flush() }

    func cell(_ value: QueryValue) -> String { escapingControlCharacters(value.description) }

    mutating func tableLine(_ cells: [String]) {
        let widths = widths ?? []
        let padded = cells.enumerated().map { index, text in
            index == cells.count - 1 ? text : text + String(repeating: " ", count: max(0, (index < widths.count ? widths[index] : 0) - text.count))
        }
        output.line(padded.joined(separator: "  "))
    }

    /// A CSV field: escaped first on a terminal, then quoted as RFC 4180 says when it holds a
    /// quote, a comma, CR or LF (which only a pipe or a file gets raw).
    func csvField(_ value: QueryValue) -> String {
        let text = terminal ? escapingControlCharacters(value.description) : value.description
        guard text.utf8.contains(where: { $0 == 44 || $0 == 34 || $0 == 10 || $0 == 13 }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Column names as JSON keys, each once: a name seen before gets ":1", ":2"..., the first of
    /// them not taken, as SQLite names the columns of a subquery (`SELECT 1 AS a, 2 AS a`: a, a:1).
    static func uniqueKeys(_ names: [String]) -> [String] {
        var taken = Set<String>()
        return names.map { name in
            var key = name
            var suffix = 0
            while taken.contains(key) {
                suffix += 1
                key = "\(name):\(suffix)"
            }
            taken.insert(key)
            return key
        }
    }

    func json(_ row: QueryRow, keys: [String]) -> String {
        var line = "{"
        for (index, key) in keys.enumerated() {
            if index > 0 { line += "," }
            line += jsonString(key) + ":"
            switch row.values[index] {
            case .null: line += "null"
            case .integer(let value): line += String(value)
            // JSON has no infinity: the string show --json writes ("inf", "-inf"; SQLite holds no NaN).
            case .real(let value): line += value.isFinite ? value.description : jsonString(value.isNaN ? "nan" : value.description)
            case .text(let value): line += jsonString(value)
            case .blob: line += jsonString(row.values[index].description)
            }
        }
        return line + "}"
    }

    /// A JSON string: Logbook's one escaping for JSON (escapingJSON), in quotes.
    func jsonString(_ text: String) -> String { "\"" + escapingJSON(text) + "\"" }
}
