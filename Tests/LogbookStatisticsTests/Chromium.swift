import Foundation
import LogbookTestKit
import XCTest

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs headless Chromium on a page, for the report's tests: its DOM after the scripts ran, or a
/// screenshot. Chromium runs in its own process group, with a throw-away profile and HOME, and
/// the whole group is killed after the timeout.
struct Chromium {
    static let path = "/usr/bin/chromium"
    static let timeout: TimeInterval = 60

    /// Flags of every run: headless, no sandbox (containers run as root), no GPU, a throw-away
    /// profile and nothing in the background that could reach the network.
    static func commonFlags(profile: URL) -> [String] {
        [
            "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile.path)",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
            "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage",
            "--mute-audio", "--hide-scrollbars",
        ]
    }

    struct Run {
        var exitStatus: Int32?
        var timedOut: Bool
        var stdout: String
        var stderr: String
        var seconds: Double
    }

    /// A directory for one test's profile, pages and screenshots (removed by `cleanUp`).
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("logbook-report-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func cleanUp() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Whether the tests may skip Chromium (LOGBOOK_SKIP_CHROMIUM=1); otherwise it must be installed.
    static func available(file: StaticString = #filePath, line: UInt = #line) throws -> Bool {
        if ProcessInfo.processInfo.environment["LOGBOOK_SKIP_CHROMIUM"] == "1" {
            throw XCTSkip("LOGBOOK_SKIP_CHROMIUM=1")
        }
        guard FileManager.default.isExecutableFile(atPath: path) else {
            XCTFail("""
                Chromium is needed to render the report but \(path) is missing: install it \
                (Debian: apt-get install -y chromium) or set LOGBOOK_SKIP_CHROMIUM=1 to skip.
                """, file: file, line: line)
            return false
        }
        return true
    }

    /// Writes `html` to a file of the directory and returns its URL.
    func write(_ html: String, name: String) throws -> URL {
        let url = directory.appendingPathComponent(name)
        try Data(html.utf8).write(to: url)
        return url
    }

    /// The page's DOM once loaded and its scripts run (`--dump-dom`).
    func dumpDOM(_ page: URL) throws -> Run {
        try run(Self.commonFlags(profile: profile("dom")) + ["--dump-dom", page.absoluteString])
    }

    /// A PNG screenshot of the page's first `height` pixels at `width` wide.
    func screenshot(_ page: URL, to png: URL, width: Int = 1280, height: Int = 2600) throws -> Run {
        try run(Self.commonFlags(profile: profile("shot")) + [
            "--screenshot=\(png.path)", "--window-size=\(width),\(height)", page.absoluteString,
        ])
    }

    private func profile(_ name: String) -> URL {
        directory.appendingPathComponent("profile-\(name)-\(UUID().uuidString)", isDirectory: true)
    }

    /// Runs Chromium with `arguments`, its output in files, and waits up to ``timeout``.
    func run(_ arguments: [String]) throws -> Run {
        let started = Date()
        let out = directory.appendingPathComponent("stdout-\(UUID().uuidString)")
        let err = directory.appendingPathComponent("stderr-\(UUID().uuidString)")
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = directory.path
        environment["XDG_CONFIG_HOME"] = directory.appendingPathComponent("config").path
        environment["XDG_CACHE_HOME"] = directory.appendingPathComponent("cache").path

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, out.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, err.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own process group (pgid = its pid), so that its helpers can be killed with it.
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)

        let argv = ([Self.path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, Self.path, &actions, &attributes, argv, envp)
        guard spawned == 0 else {
            throw NSError(domain: "Chromium", code: Int(spawned), userInfo: [
                NSLocalizedDescriptionKey: "posix_spawn \(Self.path) failed: \(String(cString: strerror(spawned)))",
            ])
        }

        var status: Int32 = 0
        var timedOut = false
        let deadline = Date().addingTimeInterval(Self.timeout)
        while true {
            let waited = waitpid(pid, &status, WNOHANG)
            if waited == pid { break }
            if waited < 0, errno != EINTR { break }
            if Date() >= deadline {
                timedOut = true
                kill(-pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                break
            }
            usleep(20_000)
        }
        // Helpers that outlived the browser process (same group, started by this run).
        kill(-pid, SIGKILL)

        let exited = status & 0x7f == 0
        return Run(
            exitStatus: exited && !timedOut ? (status >> 8) & 0xff : nil,
            timedOut: timedOut,
            stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "",
            seconds: Date().timeIntervalSince(started))
    }
}

/// What is wrong with a page Chromium loaded, from its dumped DOM: its scripts did not all run
/// to their end (`data-ready="1"` on the body) or reported errors in `<pre id="script-errors">`.
/// Empty when all is well.
func pageProblems(dom run: Chromium.Run) -> [String] {
    var problems: [String] = []
    if run.timedOut { problems.append("Chromium timed out after \(Chromium.timeout) s") }
    if let status = run.exitStatus, status != 0 { problems.append("Chromium exited with status \(status)") }
    let dom = run.stdout
    guard !dom.isEmpty else {
        return problems + ["Chromium dumped no DOM; stderr: \(run.stderr.suffix(2_000))"]
    }
    if dom.range(of: #"<body[^>]*\sdata-ready="1""#, options: .regularExpression) == nil {
        problems.append("the page's scripts did not finish: no data-ready=\"1\" on <body>")
    }
    if let start = dom.range(of: "<pre id=\"script-errors\">") {
        let rest = dom[start.upperBound...]
        let content = rest.range(of: "</pre>").map { rest[..<$0.lowerBound] } ?? rest
        if !content.isEmpty { problems.append("script errors: \(content)") }
    } else {
        problems.append("no <pre id=\"script-errors\"> in the page")
    }
    return problems
}
