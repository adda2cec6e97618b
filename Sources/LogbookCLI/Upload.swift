import ArgumentParser
import Dispatch
import Foundation
import Logbook
import LogbookUpload

struct Upload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upload files, or the complete archive files of bundles, with persistent retries.",
        discussion: """
            Each file goes into a spool first (a copy, or a hard link with --link; an archive file, a hard link), so that a killed upload resumes \
            on the next run: `logbook upload` with no PATH finishes what the spool holds. Every request \
            carries Idempotency-Key: "ID" (the SHA-256 of the content; lba-RING-NUMBER for an archive \
            file) and Logbook-Attempt: N. Retried: transport errors, timeouts, 408, 425, 429, 500, 502, \
            503, 504, with exponential backoff and full jitter, honouring Retry-After; any other status \
            gives up at once; redirects are not followed. A server that offers resumable uploads (a 104 \
            with an upload URL on the --to URL's origin) gets only what it lacks after a lost connection \
            or a kill; an upload URL is used only by the --to URL it was learned from. Files delivered \
            are marked for their destination (method and --to) and skipped there afterwards unless \
            --again. Exits 1 when anything gave up, expired, was dropped by the quota or was \
            quarantined, with the reason per item. SIGTERM or SIGINT stops it at once (a file being put \
            into the spool is put in first): uploads under way are abandoned (a resumable one keeps what the server has), every item not delivered \
            stays in the spool with its state for the next run, it says how many, and it ends by \
            that signal.
            """)

    @Option(name: .customLong("to"), help: "The URL; {id} in it is replaced by the item's id (unique: the content's SHA-256, or lba-RING-NUMBER for an archive file), {name} by its file name (archive-0000000001.lba recurs across bundles).")
    var url: String

    @Option(name: .customLong("header"), help: "A request header, 'Name: value' (repeatable).")
    var headers: [String] = []

    @Option(help: "PUT or POST.")
    var method: String = "PUT"

    @Option(help: "The spool directory (default: $XDG_STATE_HOME/logbook/upload-spool, or ~/.local/state/...).")
    var spool: String?

    @Option(help: "Attempts per item before giving up. An attempt that moved a resumable upload forward by 1 MiB or an eighth of what remained does not count, but no item gets more than 10 times this many attempts in all.")
    var maxAttempts: Int = 8

    @Option(help: "The longest wait between attempts, in seconds: the backoff (random, below 1 s doubling per attempt) never waits longer; 0 retries at once. Only a server's Retry-After may ask for more, up to an hour. A wait an earlier run stored farther ahead (the clock was set back since) is cut to these bounds, and an item never tried waits not at all.")
    var maxDelay: Int = 30

    @Option(help: "Seconds an attempt may go without sending a byte of its body (connecting included); once the body is sent, the whole answer must come within as many seconds.")
    var timeout: Int = 60

    @Option(help: "Uploads at once.")
    var parallel: Int = 2

    @Option(help: "The most the spool may hold, in MiB (a file larger than this alone is refused). Past it the oldest items go first, those of earlier runs included, each reported as dropped (exit 1).")
    var spoolQuota: Int = 1024

    @Flag(help: "Link files into the spool (where it shares their file system) instead of copying them: for files that are not changed in place until they are delivered (one that is, is given up, never sent as other content).")
    var link = false

    @Flag(help: "Upload files again even if they are marked delivered.")
    var again = false

    @Argument(help: "Files, bundles (NAME.logbook) or archive directories.")
    var paths: [String] = []

    func validate() throws {
        guard method == "PUT" || method == "POST" else { throw ValidationError("--method is PUT or POST, not '\(escapingControlCharacters(method))'") }
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
              parsed.host != nil else {
            throw ValidationError("--to takes an http:// or https:// URL, not '\(escapingControlCharacters(url))'")
        }
        for header in headers { _ = try Self.parseHeader(header) }
        guard maxAttempts >= 1, maxDelay >= 0, timeout >= 1, parallel >= 1, spoolQuota >= 1, spoolQuota <= Int.max >> 21 else {
            throw ValidationError("--max-attempts, --timeout, --parallel and --spool-quota are at least 1, --max-delay at least 0")
        }
    }

    static func parseHeader(_ text: String) throws -> (String, String) {
        guard let colon = text.firstIndex(of: ":") else {
            throw ValidationError("--header takes 'Name: value', not '\(escapingControlCharacters(text))'")
        }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces)
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        let token = CharacterSet(charactersIn: "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        let framing = ["content-length", "transfer-encoding", "connection", "expect", "upgrade", "te"]
        if framing.contains(name.lowercased()) {
            throw ValidationError("--header '\(escapingControlCharacters(name))' is set by the transport (it frames the body), not by --header")
        }
        guard !name.isEmpty, name.unicodeScalars.allSatisfy(token.contains),
              !value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) else {
            throw ValidationError("--header '\(escapingControlCharacters(text))' has a name that is not a token or a control character in its value")
        }
        return (name, value)
    }

    static func defaultSpool() -> String {
        let environment = ProcessInfo.processInfo.environment
        let state = environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state"
        return state + "/logbook/upload-spool"
    }

    func run() throws {
        // SIGTERM and SIGINT stop the run, its state saved (each item's is after every attempt):
        // the main loop below sees the signal, stops the uploader and says what is left.
        let stopSignal = Locked<Int32>(0)
        let outcomeArrived = DispatchSemaphore(value: 0)
        TerminationSignals.take { signalNumber in
            stopSignal.withLock { if $0 == 0 { $0 = signalNumber } }
            outcomeArrived.signal()
        }
        let spoolPath = spool ?? Self.defaultSpool()
        if spool == nil {
            // Only the default's parents are created; a spool the user names must have its parent.
            try? FileManager.default.createDirectory(atPath: (spoolPath as NSString).deletingLastPathComponent,
                                                     withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let headers = try self.headers.map(Self.parseHeader)
        let template = url, method = method
        let policy = RetryPolicy(maxDelay: .seconds(maxDelay), maxAttempts: maxAttempts)
        let uploader: Uploader
        do {
            // Delivery marks are per destination: the method and the URL template.
            uploader = try Uploader(.init(spool: spoolPath, policy: policy, maxConcurrentUploads: parallel,
                                          timeout: .seconds(timeout), quota: .init(maxBytes: spoolQuota << 20),
                                          destination: method + " " + template) { item in
                Self.request(template: template, method: method, headers: headers, item: item)
            })
        } catch { fail("\(error)") }

        // Uploads start at once, while the files are still being submitted (hashing a large file
        // takes a while); what was spooled by an earlier run goes first.
        let tracker = Locked(Tracker())
        let resumed = uploader.pending
        tracker.withLock { tracker in
            for item in resumed { _ = tracker.expect(item, path: nil) }
        }
        if !resumed.isEmpty { say("resuming \(resumed.count) item\(resumed.count == 1 ? "" : "s") from an earlier run") }
        let outcomesEnded = DispatchSemaphore(value: 0)
        // Every outcome is printed, those reported as the spool opened (items quarantined) too,
        // before the summary: the uploader is stopped and its outcomes read to their end first.
        Task {
            for await outcome in uploader.outcomes {
                if let (line, failed) = tracker.withLock({ $0.settle(outcome) }) {
                    if Self.terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                    if failed { warn(line) } else { say(line) }
                }
                outcomeArrived.signal()
            }
            outcomesEnded.signal()
        }
        uploader.start()
        var submissionFailures = 0
        var pathsNotSubmitted = 0
        for path in paths {
            if stopSignal.withLock({ $0 }) != 0 {  // a file being put into the spool is finished first
                pathsNotSubmitted += 1
                continue
            }
            var status = stat()
            do {
                var items: [SpooledItem] = []
                if stat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR {
                    items = try uploader.submitArchives(in: path, includingDelivered: again)
                    if items.isEmpty { say("\(path): no archive files left to upload") }
                } else if again {
                    items = [try uploader.submit(file: path, linking: link)]
                } else if let item = try uploader.submitUnlessDelivered(file: path, linking: link) {
                    items = [item]
                } else {
                    say("\(path): delivered before (--again uploads it again)")
                }
                let named = status.st_mode & S_IFMT == S_IFDIR ? nil : path  // a bundle's items by their file names
                let lines = tracker.withLock { tracker in items.compactMap { tracker.expect($0, path: named) } }
                for (line, failed) in lines { if failed { warn(line) } else { say(line) } }
            } catch {
                warn("\(error)")
                submissionFailures += 1
            }
        }
        let totalBytes = tracker.withLock { $0.bytes }
        while true {
            let (done, settled, expected) = tracker.withLock { ($0.isDone, $0.settled.count, $0.expected.count) }
            if done || stopSignal.withLock({ $0 }) != 0 { break }
            // Woken by each outcome; every 250 ms otherwise, for the progress line.
            guard outcomeArrived.wait(timeout: .now() + .milliseconds(250)) == .timedOut, Self.terminal else { continue }
            let statistics = uploader.statistics
            // Within the items in flight too: what the server has of each, and the rate of each attempt.
            let inFlight = statistics.inFlight.reduce(0) { $0 + $1.bytesDone }
            let rate = statistics.inFlight.reduce(0) { $0 + $1.bytesPerSecond }
            let bytesDone = min(totalBytes, max(0, totalBytes - statistics.pendingBytes) + inFlight)
            let line = "\r\u{1B}[K\(settled)/\(expected) done, \(Self.mebibytes(bytesDone)) of \(Self.mebibytes(totalBytes)) MiB, \(statistics.uploading) uploading at \(Self.mebibytes(Int(rate))) MiB/s, \(statistics.failedAttempts) failed attempts"
            FileHandle.standardError.write(Data(line.utf8))
        }
        Task { await uploader.stop() }  // finishes `outcomes` once the workers are done
        outcomesEnded.wait()
        if Self.terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        // Outcomes of items this run never waited for (dropped by the quota as the spool opened):
        // said and counted too.
        for (line, failed) in tracker.withLock({ $0.settleUnexpected() }) { if failed { warn(line) } else { say(line) } }
        let statistics = uploader.statistics
        if statistics.ignoredUploadURLs > 0 {
            warn("ignored \(statistics.ignoredUploadURLs) upload URL\(statistics.ignoredUploadURLs == 1 ? "" : "s") (the last: \(statistics.lastIgnoredUploadURL ?? "")): those uploads went on as plain ones")
        }
        let stoppedBy = stopSignal.withLock { $0 }
        if stoppedBy != 0 {
            let left = tracker.withLock { tracker in tracker.expected.keys.filter { tracker.settled[$0] == nil }.count }
            let notSubmitted = pathsNotSubmitted == 0 ? "" : "; \(pathsNotSubmitted) path\(pathsNotSubmitted == 1 ? " was" : "s were") not submitted"
            warn("stopped by \(TerminationSignals.name(stoppedBy)): \(left) item\(left == 1 ? "" : "s") not delivered yet stay\(left == 1 ? "s" : "") in the spool for the next run (logbook upload with no PATH finishes them)\(notSubmitted)")
        }
        let failed = tracker.withLock { $0.failed } + submissionFailures
        say("\(statistics.delivered) delivered (\(statistics.deliveredBytes) bytes), \(failed) failed, \(statistics.attempts) attempts")
        if stoppedBy != 0 { TerminationSignals.endBy(stoppedBy) }
        if failed > 0 { throw ExitCode(1) }
    }

    static let terminal = isatty(2) == 1

    /// Which items this run waits for, and what became of them.
    struct Tracker {
        var expected: [String: String] = [:]  // id -> name
        var settled: [String: Bool] = [:]     // id -> failed
        /// Outcomes of items that finished before their submission was recorded here.
        var early: [String: Uploader.Outcome] = [:]
        var bytes = 0
        var failed = 0

        var isDone: Bool { expected.keys.allSatisfy { settled[$0] != nil } }

        /// Records an item this run waits for; the line to print when its outcome came first, or
        /// when `path` has the same content as a file already submitted (one upload for both).
        mutating func expect(_ item: SpooledItem, path: String?) -> (String, Bool)? {
            let name = path.map { String($0.split(separator: "/").last ?? Substring($0)) } ?? Upload.name(of: item)
            if let other = expected[item.id] {
                return other == name ? nil : ("\(name): the same content as \(other), uploaded once", false)
            }
            expected[item.id] = name
            bytes += item.byteCount
            return early.removeValue(forKey: item.id).flatMap { settle($0) }
        }

        /// The lines of the outcomes kept for an item whose submission never came (an item this run
        /// did not submit nor find pending: one the quota dropped as the spool opened).
        mutating func settleUnexpected() -> [(String, Bool)] {
            let left = early.sorted { $0.key < $1.key }
            early = [:]
            return left.compactMap { settle($0.value, waitingForItsSubmission: false) }
        }

        /// The line to print for an outcome, and whether it is a failure (`nil`: printed later).
        mutating func settle(_ outcome: Uploader.Outcome, waitingForItsSubmission waits: Bool = true) -> (String, Bool)? {
            let (id, line, failure): (String, String, Bool)
            func name(_ id: String) -> String { expected[id] ?? id }
            switch outcome {
            case .delivered(let item, let attempts):
                (id, line, failure) = (item, "delivered \(name(item)) (\(attempts) attempt\(attempts == 1 ? "" : "s"))", false)
            case .gaveUp(let item, let reason):
                (id, line, failure) = (item, "gave up on \(name(item)): \(reason)", true)
            case .expired(let item):
                (id, line, failure) = (item, "gave up on \(name(item)): expired", true)
            case .dropped(let item, let reason):
                (id, line, failure) = (item, "dropped \(name(item)): \(reason)", true)
            case .quarantined(let item):
                (id, line, failure) = (item, "quarantined \(name(item)): its state or content in the spool is damaged", true)
            case .notSubmitted(let path, let reason):
                (id, line, failure) = (path, "not submitted \(path): \(reason)", true)
            }
            let waitsForItsSubmission: Bool
            switch outcome {
            case .notSubmitted, .quarantined: waitsForItsSubmission = false  // found, not submitted, by this run
            default: waitsForItsSubmission = waits && expected[id] == nil
            }
            if waitsForItsSubmission {
                early[id] = outcome
                return nil
            }
            settled[id] = failure
            if failure { failed += 1 }
            return (line, failure)
        }
    }

    static func name(of item: SpooledItem) -> String {
        item.source.isEmpty ? item.id : String(item.source.split(separator: "/").last ?? Substring(item.id))
    }

    static func mebibytes(_ bytes: Int) -> String {
        String(format: "%.1f", Double(bytes) / 1_048_576)
    }

    static func request(template: String, method: String, headers: [(String, String)], item: SpooledItem) -> DeliveryRequest {
        let allowed = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))
        let name = Self.name(of: item).addingPercentEncoding(withAllowedCharacters: allowed) ?? item.id
        let text = template.replacingOccurrences(of: "{id}", with: item.id).replacingOccurrences(of: "{name}", with: name)
        var request = DeliveryRequest(method: method, url: URL(string: text) != nil ? text : template)
        request.setHeader("Content-Type", "application/octet-stream")
        for (name, value) in headers { request.setHeader(name, value) }
        return request
    }
}
