import Foundation
import Logbook
import XCTest

/// A python3 server of Tests/Servers (upload_server.py, or another with the same command line:
/// PORT LOG, the port printed, exiting when stdin closes) on 127.0.0.1, started by the test.
package final class UploadServer {
    package let process = Process()
    package let lifeline = Pipe()
    package let port: Int
    package let log: String
    package let bodies: String

    /// With `keepsBodies`, every 2xx body is stored in `bodies` under its key.
    package init(directory: String, keepsBodies: Bool = false, script: String = "upload_server.py") throws {
        log = directory + "/requests.jsonl"
        bodies = directory + "/bodies"
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", repositoryRoot + "/Tests/Servers/" + script, "0", log]
        if keepsBodies {
            try FileManager.default.createDirectory(atPath: bodies, withIntermediateDirectories: true)
            process.arguments!.append(bodies)
        }
        let output = Pipe()
        process.standardOutput = output
        // Never the test's own stdout or stderr: a server that outlived a killed test would hold
        // them open, and `swift test` waits for their end.
        process.standardError = FileHandle.nullDevice
        process.standardInput = lifeline  // the server exits when this closes (here, or by our death)
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw XCTSkip("the test server did not start: \(line)")
        }
        self.port = port
    }

    deinit {
        try? lifeline.fileHandleForWriting.close()
        process.terminate()
    }

    package func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// How many requests arrived (counted when their headers were read; upload_server.py only).
    package func arrivals() -> Int {
        guard let text = try? String(contentsOfFile: log + ".arrivals", encoding: .utf8) else { return 0 }
        return text.split(separator: "\n").count
    }

    /// Lets the requests that `/hold` (upload_server.py) or `/hold/v1/logs` (otlp_server.py)
    /// holds be answered.
    package func release() { FileManager.default.createFile(atPath: log + ".release", contents: nil) }

    /// Every request it got: path, Idempotency-Key, attempt header, body bytes, its answer.
    package func requests() -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: log, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }
}
