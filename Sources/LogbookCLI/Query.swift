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
            time_ns('2026-11-28T18:00:00Z'). Conditions on time, level, logger, site, template, file and \
            function are decided before a record is decoded. Example:
              logbook query app.logbook "SELECT template, count(*), percentile(arg1, 99) FROM records \
            WHERE level >= 'warning' GROUP BY site"
            """)

    @Argument(help: ArgumentHelp("One or more sources, then the SQL statement.", valueName: "source... sql"))
    var arguments: [String] = []

    @Flag(help: "One JSON object per row.")
    var json = false

    @Flag(help: "Comma-separated values (quoted as RFC 4180 says; lines end in LF), a header row first.")
    var csv = false

    @Flag(name: [.short, .long], help: "Run the query again on the records new since the last run, until interrupted (a query without aggregates or ORDER BY).")
    var follow = false

    @Option(help: "Seconds between runs with --follow.")
    var interval: Double = 0.2

    func validate() throws {
        guard arguments.count >= 2 else { throw ValidationError("logbook query takes one or more sources, then the SQL") }
        guard !(json && csv) else { throw ValidationError("--json and --csv: choose one") }
        try validateInterval(interval)
    }

    func run() throws {
        let sql = arguments.last!
        let sources = Array(arguments.dropLast())
        let query: LogQuery
        do { query = try LogQuery(sources: sources) } catch { fail("\(error)") }
        var printer = RowPrinter(style: json ? .json : csv ? .csv : .table)
        do {
            if follow {
                guard try query.isStreamable(sql) else {
                    throw ValidationError("--follow runs a query that returns rows of records as they come: one scan of records, and no aggregate (count, avg, GROUP BY), ORDER BY, DISTINCT, UNION or LIMIT")
                }
                query.follow = true
                signal(SIGPIPE, SIG_IGN)
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
struct RowPrinter {
    enum Style { case table, json, csv }
    let style: Style
    var output = Output()
    var held: [QueryRow] = []
    var widths: [Int]?
    var rowsPrinted = 0
    var headerDone = false

    init(style: Style) { self.style = style }

    mutating func row(_ row: QueryRow) {
        rowsPrinted += 1
        switch style {
        case .json: output.line(json(row))
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

    func csvField(_ value: QueryValue) -> String {
        let text = value.description
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    func json(_ row: QueryRow) -> String {
        var line = "{"
        for (index, name) in row.columnNames.enumerated() {
            if index > 0 { line += "," }
            line += jsonString(name) + ":"
            switch row.values[index] {
            case .null: line += "null"
            case .integer(let value): line += String(value)
            case .real(let value): line += value.isFinite ? value.description : "null"
            case .text(let value): line += jsonString(value)
            case .blob: line += jsonString(row.values[index].description)
            }
        }
        return line + "}"
    }

    /// A JSON string: Logbook's one escaping for JSON (escapingJSON), in quotes.
    func jsonString(_ text: String) -> String { "\"" + escapingJSON(text) + "\"" }
}
