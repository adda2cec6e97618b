import ArgumentParser
import Logbook
import LogbookQuery
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@main
struct LogbookCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logbook",
        abstract: "Read Logbook bundles: show entries as text or JSON, follow a live writer, SQL over typed records, statistics and an HTML report, verify, inspect, upload, export.",
        subcommands: [Show.self, Query.self, Stats.self, Report.self, Verify.self, Info.self, Upload.self, Export.self],
        defaultSubcommand: Show.self)
}

/// Buffered standard output: entries are rendered into one buffer, written once per 64 KiB.
struct Output {
    var renderer = LineRenderer()

    mutating func line(_ text: String) {
        renderer.bytes.append(contentsOf: text.utf8)
        renderer.bytes.append(10)
        if renderer.bytes.count >= 1 << 16 { flush() }
    }

    mutating func entry(_ entry: LogEntry, as format: LineRenderer.Format) {
        renderer.append(entry, as: format)
        if renderer.bytes.count >= 1 << 16 { flush() }
    }

    mutating func record(_ record: LogRecord, as format: LineRenderer.Format) {
        renderer.append(record, as: format)
        if renderer.bytes.count >= 1 << 16 { flush() }
    }

    mutating func flush() {
        guard !renderer.bytes.isEmpty else { return }
        renderer.bytes.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = retryingInterrupts { write(1, bytes.baseAddress! + offset, bytes.count - offset) }
                if n < 0 { exit(errno == EPIPE ? 0 : 1) }
                offset += n
            }
        }
        renderer.removeAll()
    }
}

/// What every subcommand reads.
let bundleArgumentHelp: ArgumentHelp =
    "A .logbook bundle (its archive files included), an archive directory, or one archive file."

/// Every line of text the CLI prints besides entries (which the renderer escapes) goes through
/// here or `warn`: paths, host and executable names, issue descriptions and error text come from
/// files anyone may have named, so they reach the terminal escaped (`escapingControlCharacters`).
func say(_ line: String) {
    print(escapingControlCharacters(line))
}

func warn(_ message: String) {
    let text = Array("logbook: \(escapingControlCharacters(message))\n".utf8)
    _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    warn(message)
    exit(1)
}

/// --interval of the following commands (show, query, export): 10 ms to a day.
func validateInterval(_ interval: Double) throws {
    guard interval.isFinite, interval >= 0.01, interval <= 86_400 else {
        throw ValidationError("--interval takes seconds from 0.01 to 86400, not \(interval)")
    }
}

/// Sleeps `seconds` (a validated --interval), a signal's interruption ending it early.
func pause(_ seconds: Double) {
    var time = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
    _ = nanosleep(&time, nil)
}

/// "2026-11-21T08:00:00Z" or a duration before now: "90s", "15m", "2h", "1d".
func parseTime(_ text: String, option: String) throws -> Int64 {
    if let value = parseRFC3339(text) { return value }
    let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
    if let unit = text.last, let scale = units[unit], let amount = Int64(text.dropLast()), amount >= 0 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let nowNanoseconds = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        // Durations past 1677 (Int64 nanoseconds) are refused, not trapped on.
        let (seconds, overflow) = amount.multipliedReportingOverflow(by: scale)
        let (nanoseconds, overflow2) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (time, overflow3) = nowNanoseconds.subtractingReportingOverflow(nanoseconds)
        guard !overflow, !overflow2, !overflow3 else {
            throw ValidationError("\(option): '\(escapingControlCharacters(text))' reaches before 1677, the earliest time Logbook can name")
        }
        return time
    }
    throw ValidationError("\(option) takes an RFC 3339 time (2026-11-21T08:00:00Z) or a duration before now (90s, 15m, 2h, 1d), not '\(escapingControlCharacters(text))'")
}

/// The records a command reads: loggers, level and time, decided by the C reader before a record
/// is decoded (a record of an unknown level passes a minimum as if it were critical).
struct RecordSelection: ParsableArguments {
    @Option(help: "Only these loggers (a name, or a prefix before a dot: 'net' matches 'net.http'). Repeatable.")
    var logger: [String] = []

    @Option(help: "Minimum level: trace, debug, info, notice, warning, error, critical.")
    var level: String?

    @Option(help: "Only entries at or after this time (RFC 3339, or a duration before now such as 15m).")
    var since: String?

    @Option(help: "Only entries before this time (RFC 3339, or a duration before now).")
    var until: String?

    func filter() throws -> LogReader.Filter {
        var minimum: LogLevel?
        if let level {
            guard let parsed = LogLevel(name: level) else {
                throw ValidationError("--level takes trace, debug, info, notice, warning, error or critical, not '\(escapingControlCharacters(level))'")
            }
            minimum = parsed
        }
        return LogReader.Filter(
            minimumLevel: minimum, sinceNanoseconds: try since.map { try parseTime($0, option: "--since") },
            untilNanoseconds: try until.map { try parseTime($0, option: "--until") }, loggers: logger)
    }
}

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the entries of a bundle in time order.")

    @Argument(help: bundleArgumentHelp)
    var bundle: String

    @Flag(help: "One JSON object per line.")
    var json = false

    @Flag(name: [.short, .long], help: "Keep printing new entries of a running writer until interrupted (SIGINT or SIGTERM, even one its parent ignored; it ends by that signal); a bundle removed and made again at the path is said (stderr; --json: a notice) and followed from its start.")
    var follow = false

    @OptionGroup var selection: RecordSelection

    @Option(help: "Only entries whose message, or one of whose metadata pairs as `key=value`, matches this regular expression.")
    var grep: String?

    @Option(name: .customLong("where"), help: ArgumentHelp("Only entries for which this holds: a SQL condition over the columns of `logbook query`'s records table (\"level >= 'warning' AND arg2 > 250\"), or key=value for a metadata key that is no column (`request_id=abc`: the key ends at the first =, a string value is compared as logged). Repeat for several; all must hold.", valueName: "condition"))
    var conditions: [String] = []

    @Flag(help: "Append the call site (file:line) and thread to each text line.")
    var source = false

    @Option(help: "Seconds between polls with --follow.")
    var interval: Double = 0.2

    func validate() throws { try validateInterval(interval) }

    func run() throws {
        let filter = try selection.filter()
        let pattern: Regex<AnyRegexOutput>?
        do { pattern = try grep.map { try Regex($0) } } catch {
            throw ValidationError("--grep: not a valid regular expression: \(escapingControlCharacters("\(error)"))")
        }
        var reader: LogReader
        do { reader = try LogReader(path: bundle) } catch { fail("\(error)") }

        var output = Output()
        let format: LineRenderer.Format = json ? .json : .text(includeSource: source)
        let (wanted, condition) = Self.conditions(conditions, bundle: bundle)
        let emit: (LogRecord) -> Void
        if pattern != nil || !wanted.isEmpty || condition != nil {
            emit = { record in
                guard Self.matches(record, pattern: pattern, wanted: wanted) else { return }
                if let condition {
                    do {
                        guard try condition.matches(record) else { return }
                    } catch {
                        output.flush()
                        fail("--where: \(error)")
                    }
                }
                output.record(record, as: format)
            }
        } else {
            emit = { record in output.record(record, as: format) }
        }
        /// A loss a follower learns of as a growing count (records a writer lapped it by, archive
        /// files retention deleted before it read them): what is new since it was last said, a
        /// line on stderr and, with --json, a notice object in the stream where the gap is.
        func sayGrowth(of total: UInt64, since said: inout UInt64, notice: String, unit: String, text: String) {
            guard total > said else { return }
            let new = total - said
            said = total
            if json { output.line("{\"notice\":\"\(notice)\",\"\(unit)\":\(new),\"total\":\(total)}") }
            output.flush()
            warn("\(new) \(text) (\(total) since following began)")
        }
        var overwrittenSaid: UInt64 = 0
        func sayOverwritten() {
            sayGrowth(of: reader.overwrittenRecords, since: &overwrittenSaid, notice: "overwritten", unit: "records",
                      text: "records were overwritten before they could be read")
        }
        var deletedSaid: UInt64 = 0
        func sayDeletedUnread() {
            sayGrowth(of: reader.archiveFilesDeletedUnread, since: &deletedSaid, notice: "deleted", unit: "files",
                      text: "archive files were deleted by retention before they could be read: their records are lost to this follower")
        }
        var alteredSaid = 0
        /// Records whose pages came back from different moments after a power loss are never
        /// shown: a line on stderr says how many, and with --json a notice object in the stream.
        func sayAltered() {
            let altered = reader.issues.filter(\.isAlteredRecord)
            guard altered.count > alteredSaid else { return }
            let new = altered.count - alteredSaid
            alteredSaid = altered.count
            if json { output.line("{\"notice\":\"altered\",\"records\":\(new)}") }
            output.flush()
            warn("\(new) records were not shown: their bytes after the first page are from another moment (a power loss) or damaged; run `logbook verify \(bundle)`")
        }
        // "Until interrupted", also when the parent ignores SIGINT; before the first entry, which a
        // script may wait for before it interrupts.
        if follow { TerminationSignals.endOnArrival() }
        do {
            try reader.stream(where: filter, emit)
            sayAltered()
            output.flush()
            // Nothing shown, and why: said once, also before following (which waits for the
            // creation to complete, not for a removed bundle to come back).
            var neverCompleted = reader.wasNeverCompleted
            if neverCompleted { warn("\(bundle): \(Info.neverCompleted)") }
            guard follow else {
                // What could not be shown is said on stderr, so that a listing is never silently
                // partial; `logbook verify` lists it.
                let summary = try? reader.verify()
                let failures = reader.issues.filter(\.isFailure)
                if !failures.isEmpty {
                    let records = failures.reduce(UInt64(0)) { $0 + $1.records }
                    let lost = records > 0 ? " (\(records) records unreadable or missing)" : ""
                    warn("\(failures.count) problems in \(bundle)\(lost); run `logbook verify \(bundle)`")
                } else if let lost = summary?.recordsLost, lost > 0 {
                    warn("\(lost) records are missing; run `logbook verify \(bundle)`")
                }
                return
            }
            signal(SIGPIPE, SIG_IGN)
            var removedSaid = false
            var waitingReason = ""
            while true {
                pause(interval)
                try reader.stream(where: filter, emit)
                sayOverwritten()
                sayDeletedUnread()
                sayAltered()
                output.flush()
                // A bundle removed and made again at the path is another ring: the old reader
                // would wait on the removed file forever. Say so and follow the new one from its
                // start (what the old one held was read above).
                let identity = try reader.bundleIdentity()
                if identity == .same {
                    if removedSaid { // moved away and back: the same ring
                        removedSaid = false
                        if json { output.line("{\"notice\":\"back\"}") }
                        output.flush()
                        warn("\(bundle) is back (the same bundle); following it on")
                    }
                    continue
                }
                if identity == .removed && !removedSaid && !neverCompleted {
                    removedSaid = true
                    if json { output.line("{\"notice\":\"removed\"}") }
                    output.flush()
                    warn("\(bundle) was removed; waiting for a bundle to be made there again")
                }
                let next: LogReader
                do {
                    next = try LogReader(path: bundle)
                } catch {
                    // Something that is no bundle where it was (a FIFO, a plain file, an empty
                    // directory): said once for each new reason, then waited on.
                    let reason = "\(error)"
                    if reason != waitingReason && access(bundle, F_OK) == 0 {
                        warn("\(bundle) cannot be followed now: \(reason); waiting for a bundle to be made there")
                    }
                    waitingReason = reason
                    continue
                }
                guard (try? next.bundleIdentity()) == .same else { continue }
                waitingReason = ""
                reader = next
                overwrittenSaid = 0
                deletedSaid = 0
                alteredSaid = 0
                removedSaid = false
                if neverCompleted {
                    // The creation said above completed: this is the same bundle's start.
                    warn("\(bundle) is complete now; following it from its start")
                    neverCompleted = false
                } else {
                    if json { output.line("{\"notice\":\"replaced\"}") }
                    output.flush()
                    warn("\(bundle) is another bundle now (made again at this path); following it from its start")
                }
                try reader.stream(where: filter, emit)
                sayOverwritten()
                sayDeletedUnread()
                sayAltered()
                output.flush()
            }
        } catch {
            output.flush()
            fail("\(error)")
        }
    }
}

extension Show {
    /// --where: a SQL condition over the columns of `records` when it is one; else `key=value` on a
    /// metadata key (`request_id=abc`, `my key=v v`, `q=a=b=c`: SQL would not have them).
    static func conditions(_ conditions: [String], bundle: String) -> (metadata: [(key: String, value: String)], sql: RecordCondition?) {
        guard !conditions.isEmpty else { return ([], nil) }
        let query: LogQuery
        do { query = try LogQuery(sources: [bundle]) } catch { fail("\(error)") }
        var metadata: [(key: String, value: String)] = []
        var sql: [String] = []
        for condition in conditions {
            do {
                _ = try query.condition(condition)
                sql.append(condition)
            } catch {
                // key=value only for a key that is no column (logger=db means logger = 'db', which
                // SQL says needs quotes) and has no blank at its ends (a = 100 is SQL gone wrong).
                guard let equals = condition.firstIndex(of: "="), equals != condition.startIndex,
                    !"<>!=".contains(condition[condition.index(before: equals)]),
                    !condition[condition.index(after: equals)...].hasPrefix("="),
                    case let key = String(condition[..<equals]), key.trimmingCharacters(in: .whitespaces) == key,
                    !LogQuery.recordColumns.contains(key.lowercased()), key.lowercased() != "rowid"
                else {
                    fail("--where: '\(condition)' is neither a SQL condition (\(error)) nor key=value on a metadata key that is no column")
                }
                metadata.append((String(condition[..<equals]), String(condition[condition.index(after: equals)...])))
            }
        }
        guard !sql.isEmpty else { return (metadata, nil) }
        do {
            return (metadata, try query.condition(sql.count == 1 ? sql[0] : sql.map { "(\($0))" }.joined(separator: " AND ")))
        } catch {
            fail("--where: \(error)")
        }
    }

    /// --grep: the message or a metadata pair as `key=value` matches; --where: every key is there
    /// with that value. A string is compared as it was logged (not quoted or escaped as `show`
    /// prints it), any other value as `show` prints it. Metadata is decoded only when the message
    /// alone does not decide.
    static func matches(_ record: LogRecord, pattern: Regex<AnyRegexOutput>?, wanted: [(key: String, value: String)]) -> Bool {
        var metadata: LogMetadata?
        func pairs() -> LogMetadata {
            if let metadata { return metadata }
            let decoded = record.entry.metadata
            metadata = decoded
            return decoded
        }
        func text(_ value: LogMetadataValue) -> String { value.string ?? value.description }
        for condition in wanted {
            guard let value = pairs()[condition.key], text(value) == condition.value else { return false }
        }
        guard let pattern else { return true }
        if (try? pattern.firstMatch(in: record.message)) != nil { return true }
        return pairs().pairs.contains { (try? pattern.firstMatch(in: "\($0.key)=\(text($0.value))")) != nil }
    }
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a bundle; list every corrupt or skipped range. Exits 1 if anything is damaged.")

    @Argument(help: bundleArgumentHelp)
    var bundle: String

    func run() throws {
        let reader: LogReader
        do { reader = try LogReader(path: bundle) } catch { fail("\(error)") }
        var count = 0
        var unreadable: LogbookError?
        // Streamed: every record is checked (no filter), memory bounded by the read window.
        do { try reader.stream { _ in count += 1 } } catch let error as LogbookError { unreadable = error }
        let summary = unreadable == nil ? try? reader.verify() : nil
        // Records the overwrite policy destroyed are what an overwrite ring is for: a count on its
        // own line, not an issue.
        let issues = reader.issues.filter { $0.kind != .overwritten }
        let overwrittenIssues = reader.issues.filter { $0.kind == .overwritten }
        let overwritten = overwrittenIssues.reduce(UInt64(0)) { $0 + $1.records }
        for issue in issues { say("\(issue)") }
        let failures = issues.filter(\.isFailure).count
        if let unreadable {
            say("unreadable: \(unreadable)")
            throw ExitCode(1)
        }
        if !overwrittenIssues.isEmpty {
            let records = overwritten > 0 ? "\(overwritten) records" : "records"
            say("overwritten: \(records) destroyed by the overwrite policy before they were read or archived (expected of an overwrite ring, not damage)")
        }
        say("\(count) entries, \(issues.count) issues, \(failures) failures")
        if let summary {
            if let expected = summary.recordsExpected {
                var line = "records: \(summary.recordsFound) read of \(expected) the bundle holds"
                if summary.recordsUnreadable > 0 { line += ", \(summary.recordsUnreadable) unreadable" }
                if summary.recordsLost > 0 { line += ", \(summary.recordsLost) missing" }
                line += "; \(summary.recordsOverwritten) overwritten, \(summary.recordsRetired) in archive files retention deleted, \(summary.recordsDropped) dropped when logged"
                say(line)
            } else if summary.writerAlive {
                say("records: a writer is running; records are counted once it stops")
            }
        }
        if failures > 0 { throw ExitCode(1) }
    }
}

/// The rate of the last records read (up to `capacity` of them), from their timestamps.
struct RecentRate {
    let capacity = 100_000
    private var times: [Int64] = []
    private var next = 0

    mutating func add(_ nanoseconds: Int64) {
        if times.count < capacity { times.append(nanoseconds) } else { times[next] = nanoseconds }
        next = (next + 1) % capacity
    }

    /// Records per second over the window, or nil below 2 records or a span of 0.
    var perSecond: Double? {
        guard times.count >= 2 else { return nil }
        let oldest = times.count < capacity ? times[0] : times[next]
        let newest = times[(next + times.count - 1) % times.count]
        guard newest > oldest else { return nil }
        return Double(times.count - 1) / (Double(newest - oldest) / 1e9)
    }

    var count: Int { times.count }
}

/// What the ring holds, sized by what was logged: records of the mean size so far, and how long
/// that is at the recent rate (the ring's history before the overwrite policy reuses it, or
/// before a lossless ring needs the archiver).
func ringHolds(_ info: BundleInfo, recent: RecentRate) -> String? {
    let c = info.counters
    guard c.records > 0, c.bytes > 0 else { return nil }
    // The bytes records may take: each chunk less its 64-byte header (logbook_format.h). The
    // counters' bytes are the records' committed bytes, their headers and padding included.
    let ringBytes = Double(info.chunkCount) * Double(info.chunkSize - 64)
    let mean = Double(c.bytes) / Double(c.records)
    let records = ringBytes / mean
    var text = "about \(Int(records)) records of \(Int(mean.rounded())) bytes (the mean so far)"
    if let rate = recent.perSecond {
        text += String(format: ", %.1f s at %.0f records/s (the rate of the last %d records)",
                       records / rate, rate, recent.count)
    }
    return text
}

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a bundle's metadata, counters and archive state (or an archive directory's or file's).",
        discussion: "Exits 1 when the bundle's ring cannot be read (`logbook verify` says why). A bundle whose creation was cut short, to which nothing was ever logged, is said to be so, and exits 0.")

    @Argument(help: bundleArgumentHelp)
    var bundle: String

    func run() throws {
        do {
            let reader = try LogReader(path: bundle)
            var entries = 0
            var recent = RecentRate()
            try reader.scan { record in
                entries += 1
                recent.add(record.wallNanoseconds)
            }
            let files = try reader.archiveFiles()
            guard reader.isBundle else {
                say("archive:         \(bundle)")
                printArchiveFiles(files)
                say("entries:         \(entries)")
                printIssues(reader)
                return
            }
            if reader.wasNeverCompleted {
                // Not damage (verify passes): there is no ring to describe, and nothing was logged.
                say("bundle:          \(bundle)")
                say("state:           \(Self.neverCompleted)")
                say("entries:         \(entries)")
                printIssues(reader, besides: 1)
                return
            }
            let info: BundleInfo
            do { info = try reader.info() } catch {
                // A damaged or missing ring hides its counters, not the rest; as `verify`, the
                // command fails.
                say("bundle:          \(bundle)")
                say("ring:            unreadable: \(error)")
                printArchiveFiles(files)
                say("entries:         \(entries)")
                printIssues(reader)
                throw ExitCode(1)
            }
            say("bundle:          \(bundle)")
            say("format:          version \(info.formatVersion)")
            say("created:         \(formatRFC3339(nanoseconds: info.createdNanoseconds))")
            say("ring:            \(info.chunkCount) chunks × \(info.chunkSize) bytes = \(UInt64(info.chunkCount) * UInt64(info.chunkSize)) bytes")
            say("wrap policy:     \(info.wrapPolicy.map { "\($0)" } ?? "unknown")")
            say("writer:          pid \(info.writerPID) (\(info.writerAlive ? "running" : "not running"))")
            say("chunks:          \(info.chunksActive) active, \(info.chunksSealed) sealed, \(info.chunksArchived) archived, \(info.chunksFree) free")
            say("entries now:     \(entries)")
            let c = info.counters
            say("records written: \(c.records) (\(c.bytes) bytes, \(c.largeRecords) large)")
            if let holds = ringHolds(info, recent: recent) { say("ring holds:      \(holds)") }
            say("chunks claimed:  \(c.chunksClaimed) (\(c.chunksReused) reused older chunks)")
            let drops = c.drops.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue)=\($0.value)" }.joined(separator: " ")
            say("dropped:         \(c.dropped) (\(drops))")
            if info.recordsOverwritten > 0 {
                say("overwritten:     \(info.recordsOverwritten) records before they were archived (overwrite policy)")
            }
            if info.claimsAbandoned > 0 || info.chunksDiscarded > 0 {
                say("recovery:        \(info.claimsAbandoned) chunk claims cut short by a crash, \(info.chunksDiscarded) damaged chunks cleared")
            }
            let a = info.archive
            if let backend = a.backend {
                say("archiver:        \(backend.rawValue); \(a.archivedChunks) chunks (\(a.archivedBytes) bytes) archived")
                var lag = "\(a.lagChunks) chunks (\(a.lagBytes) bytes) sealed, not archived yet"
                if let oldest = a.oldestUnarchivedNanoseconds { lag += ", oldest from \(formatRFC3339(nanoseconds: oldest))" }
                say("archive lag:     \(lag)")
                if a.failures > 0 {
                    let last = a.lastError == 0 ? "recovered" : "last: \(String(cString: strerror(a.lastError)))"
                    say("archive errors:  \(a.failures) (\(last))")
                }
                if a.chunksLostUnarchived > 0 {
                    say("archive gaps:    \(a.chunksLostUnarchived) chunks overwritten before they were archived")
                }
                if let numbers = a.fileNumbers, numbers.lowerBound > 1 {
                    say("retention:       deleted files 1...\(numbers.lowerBound - 1) (\(a.retiredRecords) records)")
                }
                printArchiveFiles(files)
            }
            for s in info.sessions {
                say("session \(s.index):       pid \(s.pid) on \(s.host), \(s.executable), started \(formatRFC3339(nanoseconds: s.startedNanoseconds)), clock \(s.clock) at \(s.ticksPerSecond) Hz")
            }
            printIssues(reader)
        } catch let exit as ExitCode {
            throw exit
        } catch { fail("\(error)") }
    }

    /// What `info` and `show` say of a bundle whose creation was cut short (the reader's torn issue
    /// says it too, which `verify` lists).
    static let neverCompleted = "never completed: its creation was cut short (or is under way) before its ring was in place, so nothing was ever logged to it; the next writer's open completes it"


    func printArchiveFiles(_ files: ArchiveDirectoryInfo) {
        var text = "\(files.files) complete"
        if files.compressedFiles > 0 { text += " (\(files.compressedFiles) compressed)" }
        text += ", \(files.writingFiles) being written"
        if files.unsyncedFiles > 0 { text += ", \(files.unsyncedFiles) whose fsync failed" }
        text += "; \(files.bytes) bytes"
        if let numbers = files.numbers { text += " (numbers \(numbers.lowerBound)...\(numbers.upperBound))" }
        say("archive files:   \(text)")
    }

    /// The issues the reader found, less `besides` that the lines above said already.
    func printIssues(_ reader: LogReader, besides said: Int = 0) {
        let count = reader.issues.count - said
        if count > 0 { say("issues:          \(count) (run `logbook verify`)") }
    }
}
