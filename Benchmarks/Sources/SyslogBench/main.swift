// Helpers of Benchmarks/syslog.sh (the syslog peer comparison), small on purpose:
//   SyslogBench write BUNDLE RECORDS     a bundle of the records ExportBench writes (info, 3
//                                        arguments, 2 metadata values)
//   SyslogBench time FILE LINES CMD...   starts CMD and prints the seconds until FILE (a receiving
//                                        rsyslog's output) has LINES lines; then ends CMD (SIGTERM)
//                                        if it still runs (a forwarding rsyslog does)
// The clock starts before CMD is started and stops when the receiver has written the last line:
// process start-up, reading, sending and the receiver's writing are all in it.
import Foundation
import Logbook

let arguments = Array(CommandLine.arguments.dropFirst())

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("SyslogBench: \(message)\n".utf8))
    exit(2)
}

switch (arguments.first, arguments.count) {
case ("write", 3):
    guard let total = Int(arguments[2]) else { fail("RECORDS is a number") }
    let bundle = try LogBundle(path: arguments[1], capacity: 256 << 20)
    let log = try bundle.logger("net")
    for i in 0..<total {
        log.info("request \(i) took \(Double(i % 1000) * 0.25) ms ok=\(i & 1 == 1)", metadata: ["status": 200, "path": "/v1/items"])
    }
    try bundle.close()
case ("time", 4...):
    guard let lines = Int(arguments[2]) else { fail("LINES is a number") }
    let path = arguments[1]
    let start = DispatchTime.now().uptimeNanoseconds
    let process = Process()
    process.executableURL = URL(fileURLWithPath: arguments[3])
    process.arguments = Array(arguments.dropFirst(4))
    process.standardOutput = FileHandle.standardError  // stdout is the measurement
    try process.run()
    // Follow the file: count the newlines of what was appended, a millisecond apart.
    var counted = 0
    var descriptor: Int32 = -1
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 16)
    let deadline = start + 600 * 1_000_000_000
    while counted < lines {
        if descriptor < 0 { descriptor = open(path, O_RDONLY) }
        let n = descriptor < 0 ? 0 : read(descriptor, buffer, 1 << 20)
        if n > 0 {
            let bytes = UnsafeRawBufferPointer(start: buffer, count: n)
            counted += bytes.reduce(0) { $0 + ($1 == 10 ? 1 : 0) }
            continue
        }
        guard DispatchTime.now().uptimeNanoseconds < deadline else { fail("\(counted) of \(lines) lines after 600 s") }
        usleep(1000)
    }
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    if process.isRunning { process.terminate() }
    process.waitUntilExit()
    print(String(format: "%.4f", seconds))
default:
    fail("usage: SyslogBench write BUNDLE RECORDS | SyslogBench time FILE LINES COMMAND [ARGUMENTS...]")
}
