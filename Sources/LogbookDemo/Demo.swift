// logbook-demo BUNDLE: logs typed messages from 4 threads for about a second, then kills itself
// with SIGKILL without closing the bundle. The ring is small (256 KiB) and lossless, so it wraps
// several times: the archiver persists every filled chunk into BUNDLE/archive. `logbook show
// BUNDLE` then shows that every committed record survived, from the archive files and the ring.
import Logbook
#if canImport(Glibc)
import Glibc
#endif

final class Worker: @unchecked Sendable {
    let index: Int
    let net: Logger
    let db: Logger

    init(index: Int, net: Logger, db: Logger) {
        self.index = index
        self.net = net
        self.db = db
    }

    func run() {
        let user = "user-\(index)"
        var id = index * 1_000_000
        net.notice("worker \(index) starting for \(user)")
        while true {
            for _ in 0..<50 {
                id += 1
                let ms = Double(id % 977) / 10
                net.info("request \(id) took \(ms) ms ok=\(id % 13 != 0)")
                if id % 13 == 0 { net.warning("request \(id) failed for \(user, privacy: .private)") }
                if id % 101 == 0 { db.debug("query \(UInt32(truncatingIfNeeded: id)) rows=\(Int16(truncatingIfNeeded: id % 300))") }
            }
            usleep(10_000)  // a real program does other work between log calls
        }
    }
}

/// Thread entry: a plain function, so no actor isolation is inherited.
private func workerMain(_ raw: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    Unmanaged<Worker>.fromOpaque(raw!).takeRetainedValue().run()
    return nil
}

@main
enum Demo {
    static func main() {
        let arguments = CommandLine.arguments
        guard arguments.count == 2 else {
            print("usage: logbook-demo BUNDLE")
            exit(2)
        }
        let path = arguments[1]
        let bundle: LogBundle
        let net: Logger
        let db: Logger
        do {
            bundle = try LogBundle(path: path, capacity: 256 << 10, chunkSize: 32 << 10, wrapPolicy: .lossless,
                                   archive: ArchiveOptions(maxFileSize: 256 << 10))
            net = try bundle.logger("net")
            db = try bundle.logger("db")
        } catch {
            print("logbook-demo: \(error)")
            exit(1)
        }
        for index in 0..<4 {
            var thread = pthread_t()
            let worker = Unmanaged.passRetained(Worker(index: index, net: net, db: db)).toOpaque()
            pthread_create(&thread, nil, workerMain, worker)
        }
        usleep(1_000_000)
        db.critical("about to die by SIGKILL: no close, no flush; run: logbook show \(path)")
        let counters = bundle.counters
        let archived = bundle.archiveStats.map { "; \($0.chunksArchived) chunks archived with \($0.backend.rawValue)" } ?? ""
        print("logbook-demo: \(counters.records) records from 4 threads in \(path)\(archived); now SIGKILL (no close, no flush)")
        fflush(nil)
        // The process dies here: no close, no flush, no atexit handlers.
        kill(getpid(), SIGKILL)
    }
}
