import Foundation
import Logbook
#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection to a syslog server, carrying RFC 6587 octet-counted frames or RELP.
///
/// Plain TCP syslog has no acknowledgements: a write succeeds into the kernel's buffer even when
/// the server has just closed. So a batch counts as sent only if the connection is still up after
/// it: before and after writing, a zero-time poll looks for the server's end of the stream
/// (POLLRDHUP, POLLHUP, POLLERR); a batch written on a connection found closed is written again on
/// a new one. What the server's kernel had received but the server had not read when it went down
/// is lost all the same: only RELP (`RELPSession`) acknowledges messages.
/// POLLRDHUP (Linux, 0x2000): Glibc does not export it to Swift without _GNU_SOURCE.
let pollReadHangUp: Int16 = 0x2000

public final class SyslogConnection {
    public let host: String
    public let port: UInt16
    private var fd: Int32 = -1

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    deinit {
        disconnect()
        readBuffer.deallocate()
    }

    /// Where `receive` reads (made once: RELP reads acknowledgements thousands of times a second).
    private let readBuffer = UnsafeMutableRawPointer.allocate(byteCount: readBufferSize, alignment: 16)
    private static let readBufferSize = 65536

    public var isConnected: Bool { fd >= 0 }

    public func disconnect() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// Connects (IPv4 or IPv6, the first address that answers); throws the errno in words.
    public func connect() throws {
        disconnect()
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else { throw SyslogError.resolve(host, String(cString: gai_strerror(rc))) }
        defer { freeaddrinfo(list) }
        var lastErrno: Int32 = 0
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let address = entry {
            let s = socket(address.pointee.ai_family, address.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.ai_protocol)
            if s >= 0 {
                if Glibc.connect(s, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 {
                    var one: Int32 = 1
                    setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    fd = s
                    return
                }
                lastErrno = errno
                close(s)
            } else {
                lastErrno = errno
            }
            entry = address.pointee.ai_next
        }
        throw SyslogError.connect(host, port, String(cString: strerror(lastErrno)))
    }

    /// Appends to `buffer` what has arrived (at most 64 KiB), waiting up to `timeout`
    /// seconds for something. Returns false when the connection ended or failed (and
    /// disconnects); true, with nothing appended, on timeout.
    func receive(into buffer: inout [UInt8], timeout: Double) -> Bool {
        guard fd >= 0 else { return false }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = retryingInterrupts { poll(&entry, 1, Int32(max(0, min(timeout, 86_400)) * 1000)) }
        if ready < 0 {
            disconnect()
            return false
        }
        if ready == 0 { return true }
        let n = retryingInterrupts { recv(fd, readBuffer, Self.readBufferSize, Int32(MSG_DONTWAIT)) }
        let failed = n < 0 ? errno : 0
        if n > 0 {
            buffer.append(contentsOf: UnsafeRawBufferPointer(start: readBuffer, count: n))
            // Acknowledge what came at once, not after the delayed-ACK timer (40 ms): a RELP
            // server's Nagle algorithm holds the rest of its answers until it has our ACK, and at
            // the end of a batch we have nothing to send that would carry it. Linux clears the
            // flag as it pleases: set again after every read.
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_QUICKACK, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        if n <= 0 {
            if n < 0 && (failed == EAGAIN || failed == EWOULDBLOCK) { return true }
            disconnect()
            return false
        }
        return true
    }

    /// Whether the server has ended the stream (or the connection failed), without waiting.
    func serverHasClosed() -> Bool {
        guard fd >= 0 else { return true }
        var entry = pollfd(fd: fd, events: Int16(POLLIN) | pollReadHangUp, revents: 0)
        guard poll(&entry, 1, 0) >= 0 else { return true }
        if entry.revents & (pollReadHangUp | Int16(POLLHUP) | Int16(POLLERR)) != 0 { return true }
        if entry.revents & Int16(POLLIN) != 0 {
            // a syslog server sends nothing: data or EOF both mean the stream is not what we think
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) <= 0
        }
        return false
    }

    /// Writes `bytes` whole. Returns false (and disconnects) when the connection broke, or was
    /// found closed by the server before or (`checkingAfter`) after the write: the caller sends
    /// them again on a new connection. RELP does not check after: its acknowledgements tell.
    public func send(_ bytes: [UInt8], checkingAfter: Bool = true) -> Bool {
        failedAfterWriting = false
        guard fd >= 0, !serverHasClosed() else {
            disconnect()
            return false
        }
        var sent = 0
        while sent < bytes.count {
            let n = retryingInterrupts {
                bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            }
            if n < 0 {
                failedAfterWriting = sent > 0
                disconnect()
                return false
            }
            sent += n
        }
        if checkingAfter && serverHasClosed() {
            failedAfterWriting = true
            disconnect()
            return false
        }
        return true
    }

    /// Whether the last failed `send` had written bytes before the connection was found closed:
    /// the server may have read them (and some of the messages in them) before it closed, so
    /// writing them again may repeat them.
    public private(set) var failedAfterWriting = false
}

public enum SyslogError: Error, CustomStringConvertible {
    case resolve(String, String)
    case connect(String, UInt16, String)

    public var description: String {
        switch self {
        case .resolve(let host, let why): "cannot resolve \(host): \(why)"
        case .connect(let host, let port, let why): "cannot connect to \(host):\(port): \(why)"
        }
    }
}
