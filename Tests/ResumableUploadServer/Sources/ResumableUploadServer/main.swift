// A resumable-upload server for the uploader's tests, on 127.0.0.1:
//
//     ResumableUploadServer DIRECTORY [--rate BYTES_PER_SECOND] [--cut-after BYTES] [--hold-after BYTES]
//
// prints its port, then serves until its stdin closes (the test holds it). Each upload (PUT or
// POST) is written to DIRECTORY/uploads/PATH; resumable ones go through NIOResumableUpload, which
// answers 104 with the upload URL, offsets (HEAD) and appends (PATCH). It writes:
//   DIRECTORY/received   the bytes read from all connections (headers and bodies), as a number
//   DIRECTORY/completed  a line "PATH BYTES" for each upload that completed
// --rate reads at most that many bytes per second (so that a test's kills, made at byte counts,
// land mid-body); --cut-after closes each connection once it has read that many bytes;
// --hold-after stops reading once all connections read that many bytes, until DIRECTORY/release
// exists (so that an upload cannot end before a test has done what it does mid-body, however fast
// the machine).
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOResumableUpload

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.isEmpty {
    FileHandle.standardError.write(Data("usage: ResumableUploadServer DIRECTORY [--rate B/s] [--cut-after BYTES]\n".utf8))
    exit(2)
}
let directory = arguments[0]
func option(_ name: String) -> Int? {
    arguments.firstIndex(of: name).flatMap { arguments.indices.contains($0 + 1) ? Int(arguments[$0 + 1]) : nil }
}
let rate = option("--rate")
let cutAfter = option("--cut-after")
let holdAfter = option("--hold-after")
try FileManager.default.createDirectory(atPath: directory + "/uploads", withIntermediateDirectories: true)

/// Every byte read, from every connection; written to DIRECTORY/received as it grows.
final class Received: @unchecked Sendable {
    private let lock = NSLock()
    private var total_ = 0
    private let fd = open(directory + "/received", O_WRONLY | O_CREAT | O_TRUNC, 0o644)

    var total: Int {
        lock.lock()
        defer { lock.unlock() }
        return total_
    }

    func add(_ count: Int) {
        lock.lock()
        total_ += count
        let text = Array("\(total_)\n".utf8)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        lock.unlock()
    }
}
let received = Received()

/// Counts (and throttles, and cuts) what a connection reads, before HTTP parsing.
final class WireCounter: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private var read = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        read += buffer.readableBytes
        received.add(buffer.readableBytes)
        if let rate { usleep(UInt32(min(1_000_000, buffer.readableBytes * 1_000_000 / rate))) }
        context.fireChannelRead(data)
        if let cutAfter, read >= cutAfter { context.close(promise: nil) }
        if let holdAfter, received.total >= holdAfter, !released() { hold(context) }
    }

    private func released() -> Bool { FileManager.default.fileExists(atPath: directory + "/release") }

    /// Reads no more until the release file exists (checked every 5 ms).
    private func hold(_ context: ChannelHandlerContext) {
        let channel = context.channel
        channel.setOption(ChannelOptions.autoRead, value: false).whenSuccess {
            @Sendable func check() {
                channel.eventLoop.scheduleTask(in: .milliseconds(5)) {
                    if self.released() {
                        channel.setOption(ChannelOptions.autoRead, value: true).whenSuccess { channel.read() }
                    } else {
                        check()
                    }
                }
            }
            check()
        }
    }
}

/// Stores each upload's body under its path and records it when complete.
final class StoringHandler: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundIn = Never
    typealias OutboundOut = HTTPResponsePart
    private var file: FileHandle?
    private var path = ""
    private var bytes = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            path = (request.path ?? "/").split(separator: "?").first.map(String.init) ?? "/"
            let name = directory + "/uploads/" + path.replacingOccurrences(of: "/", with: "_")
            bytes = 0
            if request.method == .put || request.method == .post {
                _ = FileManager.default.createFile(atPath: name, contents: nil)
                file = FileHandle(forWritingAtPath: name)
            } else {
                respond(context, .notImplemented)
            }
        case .body(let body):
            bytes += body.readableBytes
            body.withUnsafeReadableBytes { try? file?.write(contentsOf: $0) }
        case .end:
            guard let file else { return }
            try? file.close()
            self.file = nil
            let line = Array("\(path) \(bytes)\n".utf8)
            let log = open(directory + "/completed", O_WRONLY | O_CREAT | O_APPEND, 0o644)
            _ = line.withUnsafeBytes { Glibc.write(log, $0.baseAddress, $0.count) }
            Glibc.close(log)
            respond(context, .created)
        }
    }

    private func respond(_ context: ChannelHandlerContext, _ status: HTTPResponse.Status) {
        var response = HTTPResponse(status: status)
        response.headerFields[.contentLength] = "0"
        context.write(wrapOutboundOut(.head(response)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

/// The origin is known once the port is: set before the first connection can come.
final class ContextBox: @unchecked Sendable { var context: HTTPResumableUploadContext? }
let box = ContextBox()
let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
let server = try ServerBootstrap(group: group)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(WireCounter())
            try sync.configureHTTPServerPipeline()
            try sync.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try sync.addHandler(HTTPResumableUploadHandler(context: box.context!, handlers: [StoringHandler()]))
        }
    }
    .bind(host: "127.0.0.1", port: 0).wait()
let port = server.localAddress!.port!
box.context = HTTPResumableUploadContext(origin: "http://127.0.0.1:\(port)")
FileHandle.standardOutput.write(Data("\(port)\n".utf8))
// The test holds our stdin: when it closes it (or dies), we go too.
while FileHandle.standardInput.availableData.count > 0 {}
exit(0)
