import ArgumentParser
import Dispatch
import Foundation
import Logbook
import LogbookExport
import LogbookUpload

/// `logbook export --otlp URL PATH`: WORK IN PROGRESS (issue 14; docs/EXPORT-PLAN.md): OTLP only,
/// one pass (no --follow, no --syslog yet).
struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export records to an OpenTelemetry collector (OTLP/HTTP JSON), from a persisted cursor.",
        discussion: """
            Records the collector acknowledged are recorded in a cursor per destination, so that a \
            killed export resumes where it stopped (repeating at most the batch in flight, counted). \
            Retried: 429, 502, 503, 504 and lost connections, honouring Retry-After; any other status is \
            not, and is reported with the collector's message. Exits 1 when a batch gave up.
            """)

    @Option(name: .customLong("otlp"), help: "The collector's logs URL, e.g. http://127.0.0.1:4318/v1/logs.")
    var url: String

    @Option(help: "service.name of the resource.")
    var service: String = "logbook"

    @Option(help: "The cursor directory (default: $XDG_STATE_HOME/logbook/export-cursors).")
    var cursors: String?

    @Option(help: "Records per batch.")
    var batch: Int = 512

    @Argument(help: "A bundle (NAME.logbook), an archive directory or an archive file.")
    var path: String

    func validate() throws {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
              parsed.host != nil else {
            throw ValidationError("--otlp takes an http:// or https:// URL, not '\(escapingControlCharacters(url))'")
        }
        guard batch > 0 else { throw ValidationError("--batch must be positive") }
    }

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        let state = environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state"
        let cursorPath = cursors ?? state + "/logbook/export-cursors"
        if cursors == nil {
            try? FileManager.default.createDirectory(atPath: (cursorPath as NSString).deletingLastPathComponent,
                                                     withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        // One cursor per destination and source: the URL and the source's real path, hashed.
        let source = (path as NSString).resolvingSymlinksInPath
        let name = "otlp-" + SHA256.hex(of: Array((url + "\n" + source).utf8)).prefix(32)
        let exporter = try Exporter(.init(source: path, destinationName: String(name), cursors: cursorPath, maximumBatchRecords: batch),
                                    otlp: OTLPDestination(url: URL(string: url)!), encoding: OTLPLogsEncoding(serviceName: service))
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<Exporter.Report, Error>!
        nonisolated(unsafe) let running = exporter
        Task {
            do { result = .success(try await running.exportAvailable()) } catch { result = .failure(error) }
            done.signal()
        }
        done.wait()
        let report = try result.get()
        say("exported \(report.exported) records" + (report.rejected > 0 ? ", \(report.rejected) rejected by the collector" : "")
            + (report.repeated > 0 ? ", \(report.repeated) sent again after a restart" : ""))
        for reason in report.gaveUp { warn("a batch gave up: \(reason)") }
        if !report.gaveUp.isEmpty { throw ExitCode(1) }
    }
}
