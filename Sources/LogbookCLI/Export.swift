import ArgumentParser
import Dispatch
import Foundation
import Logbook
import LogbookExport
import LogbookUpload

/// `logbook export --otlp URL | --syslog relp://HOST:PORT|tcp://HOST:PORT [--follow] PATH`.
struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export records to an OpenTelemetry collector (OTLP/HTTP, protobuf or JSON) or syslog (RELP or TCP), from a persisted cursor.",
        discussion: """
            Records the destination acknowledged are recorded in a cursor per destination and source, \
            so that a killed export resumes where it stopped (repeating at most the batch in flight, \
            counted). OTLP: retried on 429, 502, 503, 504 and lost connections, honouring Retry-After; \
            any other status is not, and is reported with the collector's message. Syslog: reconnects \
            with backoff; over RELP a message not acknowledged is sent again, over TCP a server that \
            goes down loses what it had received but not read. Exits 1 when a batch gave up.
            """)

    @Option(name: .customLong("otlp"), help: "The collector's logs URL, e.g. http://127.0.0.1:4318/v1/logs.")
    var url: String?

    @Option(name: .customLong("syslog"), help: """
        A syslog server: relp://HOST:PORT (RELP, every message acknowledged) or tcp://HOST:PORT \
        (octet-counted frames, no acknowledgements). RFC 5424 messages either way.
        """)
    var syslog: String?

    @Option(help: "APP-NAME of syslog messages (default: logbook).")
    var appName: String = "logbook"

    @Option(help: "service.name of the resource.")
    var service: String = "logbook"

    @Option(help: "The cursor directory (default: $XDG_STATE_HOME/logbook/export-cursors).")
    var cursors: String?

    @Flag(help: "Send bodies gzipped (Content-Encoding: gzip, level 6).")
    var gzip = false

    @Flag(help: "Send bodies compressed with zstd (Content-Encoding: zstd, level 1): about a fourth of gzip's cost.")
    var zstd = false

    @Option(help: "OTLP bodies as protobuf (application/x-protobuf) or json (application/json).")
    var encoding: OTLPLogsEncoding.Format = .protobuf

    @Option(help: "OTLP requests in flight at once (acknowledged in order: a kill sends at most these again).")
    var inFlight: Int = 4

    @Option(help: "Records per batch.")
    var batch: Int = 512

    @Flag(help: "Keep exporting a live writer's new records (and archive files rolled meanwhile) until SIGTERM or SIGINT.")
    var follow = false

    @Option(help: "Seconds between passes with --follow.")
    var interval: Double = 0.5

    @Argument(help: "A bundle (NAME.logbook), an archive directory or an archive file.")
    var path: String

    func validate() throws {
        guard (url == nil) != (syslog == nil) else { throw ValidationError("give one of --otlp URL and --syslog relp://HOST:PORT|tcp://HOST:PORT") }
        if let url {
            guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  parsed.host != nil, parsed.port.map({ (1...65535).contains($0) }) ?? true else {
                throw ValidationError("--otlp takes an http:// or https:// URL, not '\(escapingControlCharacters(url))'")
            }
        }
        if let syslog { _ = try Self.syslogAddress(syslog) }
        guard batch > 0 else { throw ValidationError("--batch must be positive") }
        guard !(gzip && zstd) else { throw ValidationError("give one of --gzip and --zstd") }
        guard inFlight >= 1, inFlight <= 64 else { throw ValidationError("--in-flight takes 1 to 64, not \(inFlight)") }
        try validateInterval(interval)
    }

    func run() throws {
        Self.takeTerminationSignals()
        // One malloc arena: records are decoded on the stream's thread and freed on the pass's,
        // and an arena per thread keeps freed pages of each resident. Measured on a backlog of 1 M
        // string-heavy records (Benchmarks/export.sh): peak RSS 62 -> 55 MB, no slower. Before
        // any thread of the export starts (arenas are made as threads first allocate).
        _ = glibcMallopt(-8 /* M_ARENA_MAX, <malloc.h> */, 1)
        let environment = ProcessInfo.processInfo.environment
        let state = environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state"
        let cursorPath = cursors ?? state + "/logbook/export-cursors"
        if cursors == nil {
            try? FileManager.default.createDirectory(atPath: (cursorPath as NSString).deletingLastPathComponent,
                                                     withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        // One cursor per destination and source: the destination as written and the source's
        // canonical absolute path (realpath: relative spellings, `..` and symlinks resolved), hashed.
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let source = realpath(absolute, nil).map { resolved in
            defer { free(resolved) }
            return String(cString: resolved)
        } ?? (absolute as NSString).standardizingPath
        let target = url ?? syslog ?? ""
        let name = (url != nil ? "otlp-" : "syslog-") + SHA256.hex(of: Array((target + "\n" + source).utf8)).prefix(32)
        let sink: Exporter.Sink
        let retrying: @Sendable (Int, String, Double) -> Void = { attempt, reason, wait in
            warn("attempt \(attempt) failed (\(escapingControlCharacters(reason))); trying again in \(String(format: "%.1f", wait)) s")
        }
        if let url {
            var destination = OTLPDestination(url: URL(string: url)!, compression: gzip ? .gzip(level: 6) : zstd ? .zstd(level: 1) : nil)
            destination.onRetry = retrying
            sink = .otlp(destination, OTLPLogsEncoding(serviceName: service, format: encoding))
        } else {
            let (transport, host, port) = try Self.syslogAddress(target)
            let destination = SyslogDestination(host: host, port: port, transport: transport, format: SyslogFormat(appName: appName))
            destination.onRetry = retrying
            sink = .syslog(destination)
        }
        let exporter = try Exporter(.init(source: path, destinationName: String(name), cursors: cursorPath, maximumBatchRecords: batch,
                                          requestsInFlight: inFlight),
                                    sink: sink)
        var total = Exporter.Report()
        repeat {
            let report: Exporter.Report
            var cancelled = false
            do { report = try pass(exporter) } catch ExportError.cancelled(let partial) {
                report = partial  // what the interrupted pass delivered counts too
                cancelled = true
            } catch is CancellationError { break }
            if report.startedOver { warn("\(escapingControlCharacters(path)) holds another ring's records than its cursor's (the bundle was made again): its cursor started over") }
            if report.overwritten > 0 {
                warn("\(report.overwritten) records were overwritten in the ring before they could be read: they are not exported")
            }
            if report.retired > 0 {
                warn("\(report.retired) records were in archive files that retention deleted before they could be read: they are not exported")
            }
            for issue in report.issues { warn("the reader reports: \(escapingControlCharacters(issue))") }
            total.overwritten += report.overwritten
            total.retired += report.retired
            total.unreadable += report.unreadable
            total.exported += report.exported
            total.rejected += report.rejected
            total.repeated += report.repeated
            total.gaveUp += report.gaveUp
            total.recordsGivenUp += report.recordsGivenUp
            total.truncated += report.truncated
            total.resent += report.resent
            for reason in report.gaveUp { warn("a batch gave up: \(reason)") }
            if cancelled { break }
            if follow && !Export.stopping.withLock({ $0 }) { _ = Export.wake.wait(timeout: .now() + max(0.01, interval)) }
        } while follow && !Export.stopping.withLock({ $0 })
        say("exported \(total.exported) records"
            + (total.recordsGivenUp > 0 ? ", \(total.recordsGivenUp) given up in \(total.gaveUp.count) batch\(total.gaveUp.count == 1 ? "" : "es") (not sent again)" : "")
            + (total.rejected > 0 ? ", \(total.rejected) rejected by the collector" : "")
            + (total.repeated > 0 ? ", \(total.repeated) sent again after a restart" : "")
            + (total.truncated > 0 ? ", \(total.truncated) syslog messages truncated" : "")
            + (total.resent > 0 ? ", \(total.resent) RELP messages resent after a broken connection" : "")
            + (total.overwritten > 0 ? ", \(total.overwritten) overwritten before they could be read" : "")
            + (total.retired > 0 ? ", \(total.retired) deleted by archive retention before they could be read" : "")
            + (total.unreadable > 0 ? ", \(total.unreadable) unreadable (damaged; see the reader's reports)" : ""))
        if !total.gaveUp.isEmpty { throw ExitCode(1) }
    }

    /// relp://HOST:PORT or tcp://HOST:PORT (HOST may be [IPv6]).
    static func syslogAddress(_ text: String) throws -> (SyslogDestination.Transport, String, UInt16) {
        guard let parsed = URL(string: text), let transport = parsed.scheme.flatMap({ SyslogDestination.Transport(rawValue: $0.lowercased()) }),
              let host = parsed.host, !host.isEmpty, let port = parsed.port, (1...65535).contains(port),
              parsed.path.isEmpty || parsed.path == "/", parsed.query == nil else {
            throw ValidationError("--syslog takes relp://HOST:PORT or tcp://HOST:PORT, not '\(escapingControlCharacters(text))'")
        }
        return (transport, host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host, UInt16(port))
    }

    static let stopping = Locked(false)
    static let running = Locked<Task<Void, Never>?>(nil)
    static let wake = DispatchSemaphore(value: 0)

    /// SIGTERM and SIGINT end --follow after the pass under way (its batch acknowledged or not, the
    /// cursor saved either way): they end a wait between passes at once and cancel the pass under
    /// way (a batch being retried is not acknowledged: it is sent again, counted, next time).
    static func takeTerminationSignals() {
        TerminationSignals.take { _ in
            Export.stopping.withLock { $0 = true }
            Export.running.withLock { $0?.cancel() }
            Export.wake.signal()
        }
    }

    /// One pass of the exporter, waited for on this thread.
    private func pass(_ exporter: Exporter) throws -> Exporter.Report {
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<Exporter.Report, Error>!
        nonisolated(unsafe) let running = exporter
        let task = Task.detached {
            do { result = .success(try await running.exportAvailable()) } catch { result = .failure(error) }
            done.signal()
        }
        Export.running.withLock { $0 = task }
        if Export.stopping.withLock({ $0 }) { task.cancel() }  // a signal before the task was known
        done.wait()
        Export.running.withLock { $0 = nil }
        return try result.get()
    }
}

extension OTLPLogsEncoding.Format: ExpressibleByArgument {}

/// glibc's `mallopt` (`<malloc.h>` is not in Swift's Glibc module); 1 on success.
@_silgen_name("mallopt")
private func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
