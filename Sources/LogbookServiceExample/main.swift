// LogbookServiceExample: a server-like program in a ServiceGroup that logs into a Logbook bundle
// until SIGTERM (or SIGINT), then shuts down gracefully and loses nothing.
//
//     LogbookServiceExample BUNDLE [--archive DIR] [--rate N] [--drain N] [--file-size BYTES]
//                                  [--lossless-wait MS] [--logbook-last]
//
//   --archive DIR       archive directory (default: BUNDLE/archive)
//   --rate N            request records per second (default 2000)
//   --drain N           records the request service logs during its own shutdown (default 100)
//   --file-size BYTES   archive files roll at this size (default 1 MiB)
//   --lossless-wait MS  how long a writer waits for the archiver when the ring is full before it
//                       drops a record (default 1000)
//   --logbook-last      put LogbookService last in the group (the wrong order: it is then shut
//                       down first, and what the request service logs afterwards is dropped)
//
// Standard output (the SIGTERM tests read it): "ready" once records are being logged; on shutdown
// "requests N" and "drained N" from the request service; after the group has finished
// "closed records=N dropped=N closed=N" from the bundle's counters ("open" instead
// of the first "closed" if the bundle were still open). Exit status 0 after a clean
// shutdown, 1 when the group (the bundle's shutdown included) threw.
import Logbook
import LogbookLifecycle
import Logging
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes a line to standard output at once (stdio would hold it in a pipe's buffer until exit).
func say(_ line: String, to descriptor: Int32 = STDOUT_FILENO) {
    var bytes = Array((line + "\n").utf8)[...]
    while !bytes.isEmpty {
        let written = retryingInterrupts { bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) } }
        guard written > 0 else { return }
        bytes = bytes.dropFirst(written)
    }
}

/// The program's work: logs requests at a steady rate until graceful shutdown, then "drains" (logs
/// what a server logs while it finishes its work) and returns.
struct RequestService: Service {
    let log: Logbook.Logger
    let rate: Int
    let drain: Int

    func run() async throws {
        // Every 10 ms a batch, so the rate holds without a sleep per record.
        let batch = max(1, rate / 100)
        var requests = 0
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            for _ in 0..<batch {
                // Clients of different lengths: records of different sizes.
                let client = "client-" + String(repeating: "x", count: requests % 41)
                log.info("request \(requests) from \(client) took \(Double(requests % 977) / 10) ms")
                requests += 1
            }
            if requests == batch { say("ready") }
            try? await Task.sleep(for: .milliseconds(10))
        }
        for index in 0..<drain {
            log.notice("drained \(index) of \(drain) \(String(repeating: "d", count: index % 23))")
        }
        say("requests \(requests)")
        say("drained \(drain)")
    }
}

func usage() -> Never {
    say("usage: LogbookServiceExample BUNDLE [--archive DIR] [--rate N] [--drain N] [--file-size BYTES] [--lossless-wait MS] [--logbook-last]",
        to: STDERR_FILENO)
    exit(2)
}

/// The value after an option, or the usage.
func value(_ arguments: inout ArraySlice<String>) -> String {
    guard let value = arguments.popFirst() else { usage() }
    return value
}

/// The number after an option, at least `minimum`, or the usage.
func number(_ arguments: inout ArraySlice<String>, minimum: Int) -> Int {
    guard let number = Int(value(&arguments)), number >= minimum else { usage() }
    return number
}

var arguments = CommandLine.arguments.dropFirst()
guard let bundlePath = arguments.popFirst(), !bundlePath.hasPrefix("--") else { usage() }
var archiveDirectory: String?
var rate = 2000
var drain = 100
var fileSize = 1 << 20
var losslessWait = 1000
var logbookLast = false
while let option = arguments.popFirst() {
    switch option {
    case "--archive": archiveDirectory = value(&arguments)
    case "--rate": rate = number(&arguments, minimum: 1)
    case "--drain": drain = number(&arguments, minimum: 0)
    case "--file-size": fileSize = number(&arguments, minimum: 0)
    case "--lossless-wait": losslessWait = number(&arguments, minimum: 0)
    case "--logbook-last": logbookLast = true
    default: usage()
    }
}

do {
    // Lossless: the ring never overwrites what the archiver has not persisted.
    let bundle = try LogBundle(
        path: bundlePath,
        capacity: 4 << 20,
        chunkSize: 16 << 10,
        wrapPolicy: .lossless,
        losslessWaitMilliseconds: losslessWait,
        archive: ArchiveOptions(directory: archiveDirectory, maxFileSize: fileSize, maxFiles: nil)
    )
    let logbook = LogbookService(bundle: bundle)
    let requests = RequestService(log: try bundle.logger("http"), rate: rate, drain: drain)

    // The group's own log lines go to standard error; swift-log into the bundle would be
    // LogbookLogging's LogbookLogHandler, but the group logs after its last service stopped.
    var groupLogger = Logging.Logger(label: "service-group") { StreamLogHandler.standardError(label: $0) }
    groupLogger.logLevel = .warning
    // LogbookService first: the group shuts services down in reverse order, so it stops last and
    // the request service can log while it drains.
    let services: [any Service] = logbookLast ? [requests, logbook] : [logbook, requests]
    let group = ServiceGroup(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: groupLogger)
    try await group.run()

    // LogbookService closed the bundle (a flush says so). The counters are exact now.
    let closed: Bool
    do { try bundle.flush(); closed = false } catch { closed = error.isClosed }
    let counters = bundle.counters
    say("\(closed ? "closed" : "open") records=\(counters.records) dropped=\(counters.dropped) closed=\(counters.drops[.closed, default: 0])")
    // Exit with the bundle still referenced, as a server's main often does: its deinit (which
    // would close it too) never runs, so the SIGTERM tests prove that LogbookService closed it.
    exit(0)
} catch {
    say("LogbookServiceExample: \(error)", to: STDERR_FILENO)
    exit(1)
}
