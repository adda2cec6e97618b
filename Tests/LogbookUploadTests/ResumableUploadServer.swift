import CLogbook
import CLogbookUpload
import Foundation
import Logbook
import LogbookTestKit
import XCTest
@testable import LogbookUpload

/// The resumable-upload server of Tests/ResumableUploadServer (swift-nio-extras'
/// NIOResumableUpload), built by `scripts/test` (or here, when it is missing) and started on
/// 127.0.0.1 by the test.
final class ResumableUploadServer {
    let process = Process()
    let lifeline = Pipe()
    let port: Int
    let directory: String

    static let executable = repositoryRoot + "/Tests/ResumableUploadServer/.build/debug/ResumableUploadServer"

    init(directory: String, rate: Int? = nil, cutAfter: Int? = nil, holdAfter: Int? = nil) throws {
        if !FileManager.default.isExecutableFile(atPath: Self.executable) {
            let (status, output) = try runProgram("/usr/bin/env", ["swift", "build", "--package-path", repositoryRoot + "/Tests/ResumableUploadServer"])
            guard status == 0 else { throw XCTSkip("the resumable-upload server did not build: \(output.suffix(2000))") }
        }
        self.directory = directory
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = [directory] + (rate.map { ["--rate", String($0)] } ?? []) + (cutAfter.map { ["--cut-after", String($0)] } ?? [])
            + (holdAfter.map { ["--hold-after", String($0)] } ?? [])
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = lifeline
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw XCTSkip("the resumable-upload server did not start: \(line)")
        }
        self.port = port
    }

    deinit {
        try? lifeline.fileHandleForWriting.close()
        process.terminate()
    }

    /// Bytes read from all connections so far (headers and bodies).
    var received: Int {
        (try? String(contentsOfFile: directory + "/received", encoding: .utf8)).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 0
    }

    /// The uploads that completed: path and bytes.
    var completed: [(path: String, bytes: Int)] {
        let text = (try? String(contentsOfFile: directory + "/completed", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            return parts.count == 2 ? (String(parts[0]), Int(parts[1]) ?? -1) : nil
        }
    }

    /// Lets a server started with `holdAfter` read on.
    func release() { FileManager.default.createFile(atPath: directory + "/release", contents: nil) }

    /// What the server stored for an upload to `path`.
    func stored(_ path: String) -> String { directory + "/uploads/" + path.replacingOccurrences(of: "/", with: "_") }
}
