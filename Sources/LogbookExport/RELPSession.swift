import Foundation
import Logbook

/// A RELP session (rsyslog's Reliable Event Logging Protocol, as librelp and imrelp speak it) over
/// a `SyslogConnection`: every syslog message is acknowledged by the server after it has taken it,
/// so a message is known delivered, and one not acknowledged when the connection breaks is sent
/// again on the next session. That is what plain TCP syslog cannot do across a server restart.
///
/// Frames, both ways: `TXNR SP COMMAND SP DATALEN [SP DATA] LF`, TXNR 1...999,999,999 counting up
/// from 1 in each session (after 999,999,999 comes 1), DATALEN decimal. The session opens with
/// `open` (offers `relp_version=0` and `commands=syslog`; the server's `rsp` must begin with 200
/// and list `syslog`), sends `syslog` frames with up to `window` unacknowledged at a time, and is
/// acknowledged by `rsp` frames with the same TXNR whose data begins with a status (200 = taken).
/// The server ends a session with `0 serverclose 0`.
final class RELPSession {
    let connection: SyslogConnection
    /// Messages sent before waiting for acknowledgements (librelp's default window is 128).
    let window: Int
    /// Seconds to wait for an acknowledgement before giving the session up.
    let timeout: Double
    /// Seconds to wait for the answer to `open`.
    let openTimeout: Double = 5
    private var nextTransaction = 1
    private var isOpen = false
    private var received: [UInt8] = []

    init(connection: SyslogConnection, window: Int = 128, timeout: Double = 30) {
        self.connection = connection
        self.window = max(1, window)
        self.timeout = timeout
    }

    enum Failure: Error, CustomStringConvertible {
        case connection(String)
        case refused(String)
        case protocolError(String)

        var description: String {
            switch self {
            case .connection(let why), .protocolError(let why): why
            case .refused(let why): "the server refused a message: \(why)"
            }
        }
    }

    /// Opens the session on a new connection.
    func open() throws {
        received = []
        consumed = 0
        nextTransaction = 1
        isOpen = false
        try connection.connect()
        let offer = Array("relp_version=0\nrelp_software=logbook\ncommands=syslog".utf8)
        let txnr = try sendFrame("open", offer)
        let answer: [UInt8]
        do { answer = try awaitResponse(txnr, timeout: min(timeout, openTimeout)) } catch Failure.connection(let why) where why.hasPrefix("no RELP") {
            end()
            // a plain TCP syslog server takes the open frame for a message and never answers
            throw Failure.protocolError("no answer to the RELP open from \(connection.host):\(connection.port) in \(Int(min(timeout, openTimeout))) s: is it a RELP server (rsyslog's imrelp)?")
        }
        guard answer.starts(with: Self.taken) else {
            end()
            throw Failure.protocolError("the server refused the RELP session: \(Self.text(answer))")
        }
        guard String(decoding: answer, as: UTF8.self).split(separator: "\n").contains(where: { $0.hasPrefix("commands=") && $0.dropFirst(9).split(separator: ",").contains("syslog") }) else {
            end()
            throw Failure.protocolError("the RELP server does not take syslog messages: \(Self.text(answer))")
        }
        isOpen = true
    }

    var isUsable: Bool { isOpen && connection.isConnected }

    /// Closes the connection without the close handshake (after a failure).
    func end() {
        isOpen = false
        connection.disconnect()
    }

    /// Sends the messages of `batch` from `first` on (RFC 5424 messages, unframed) in order and
    /// returns how many of them, from `first`, the server acknowledged, and how many were written
    /// (acknowledged or not: those may have reached the server). Up to `window` are unacknowledged
    /// at a time: as acknowledgements come, as many more are sent at once, so the server never
    /// waits for a whole window to be acknowledged, and those frames carry the TCP ACK that the
    /// server's Nagle algorithm holds its other acknowledgements for (waiting for them instead
    /// cost a delayed ACK, 40 ms, per window: 2,900 messages/s). Throws only for a refused
    /// message (a status other than 200, with the server's text) after the acknowledged ones; a
    /// broken connection returns the counts so far and ends the session.
    func send(_ batch: SyslogBatch, from first: Int) throws -> (acknowledged: Int, sent: Int) {
        let count = batch.count - first
        var acknowledged = 0, sent = 0
        var transactions: [Int] = []
        transactions.reserveCapacity(count)
        var frames: [UInt8] = []
        while acknowledged < count {
            if sent < count && sent - acknowledged < window {
                frames.removeAll(keepingCapacity: true)
                let end = min(count, acknowledged + window)
                while sent < end {
                    transactions.append(nextTransaction)
                    batch.bytes.withUnsafeBufferPointer { bytes in
                        appendFrame(nextTransaction, "syslog", UnsafeBufferPointer(rebasing: bytes[batch.range(first + sent)]), to: &frames)
                    }
                    nextTransaction = nextTransaction == 999_999_999 ? 1 : nextTransaction + 1
                    sent += 1
                }
                guard connection.send(frames, checkingAfter: false) else {
                    self.end()
                    return (acknowledged, sent)
                }
            }
            // The oldest acknowledgement, waited for; then those already received, without waiting.
            var wait = true
            while acknowledged < sent {
                let answer: [UInt8]?
                do { answer = try response(to: transactions[acknowledged], waiting: wait) } catch {
                    self.end()
                    return (acknowledged, sent)
                }
                guard let answer else { break }
                guard answer.starts(with: Self.taken) else {
                    self.end()
                    throw Failure.refused(Self.text(answer[...]))
                }
                acknowledged += 1
                wait = false
            }
        }
        return (acknowledged, sent)
    }

    /// The status that begins the answer to a message the server took.
    private static let taken: [UInt8] = Array("200".utf8)

    /// `TXNR SP COMMAND SP DATALEN [SP DATA] LF`, the numbers written without a String.
    private func appendFrame(_ txnr: Int, _ command: StaticString, _ data: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        var out = LineRenderer(capacity: 0)
        swap(&out.bytes, &bytes)
        defer { swap(&out.bytes, &bytes) }
        out.appendUnsigned(UInt64(txnr))
        out.bytes.append(0x20)
        out.appendLiteral(command)
        out.bytes.append(0x20)
        out.appendUnsigned(UInt64(data.count))
        if !data.isEmpty {
            out.bytes.append(0x20)
            out.bytes.append(contentsOf: data)
        }
        out.bytes.append(0x0A)
    }

    private func sendFrame(_ command: StaticString, _ data: [UInt8]) throws -> Int {
        let txnr = nextTransaction
        nextTransaction += 1
        var bytes: [UInt8] = []
        data.withUnsafeBufferPointer { appendFrame(txnr, command, $0, to: &bytes) }
        guard connection.send(bytes, checkingAfter: false) else { throw Failure.connection("the RELP server at \(connection.host):\(connection.port) closed the connection") }
        return txnr
    }

    /// The data of the `rsp` frame for `txnr`; throws when the connection ends, the server closes
    /// the session, a frame is malformed or answers another transaction, or nothing comes in time.
    private func awaitResponse(_ txnr: Int, timeout: Double? = nil) throws -> [UInt8] {
        try response(to: txnr, waiting: true, timeout: timeout)!
    }

    /// The data of the `rsp` frame for `txnr`; when not `waiting`, nil unless it has already been
    /// received. Throws as `awaitResponse`.
    private func response(to txnr: Int, waiting: Bool, timeout: Double? = nil) throws -> [UInt8]? {
        let timeout = timeout ?? self.timeout
        var deadline: Date?
        while true {
            if let (number, command, data) = try nextFrame() {
                switch command {
                case .serverclose: throw Failure.connection("the RELP server closed the session")
                case .other(let name): throw Failure.protocolError("unexpected RELP frame '\(name)' from the server")
                case .rsp: break
                }
                guard number == txnr else { throw Failure.protocolError("RELP response to transaction \(number), expected \(txnr)") }
                return data
            }
            guard waiting else { return nil }
            if deadline == nil { deadline = Date().addingTimeInterval(timeout) }
            let left = deadline!.timeIntervalSinceNow
            guard left > 0 else { throw Failure.connection("no RELP acknowledgement in \(Int(timeout)) s") }
            if consumed > 0 {  // what was parsed goes before more is read
                received.removeSubrange(..<consumed)
                consumed = 0
            }
            guard connection.receive(into: &received, timeout: left) else {
                throw Failure.connection("the RELP server at \(connection.host):\(connection.port) closed the connection")
            }
        }
    }

    /// How much of `received` was parsed already (dropped before the next read, not per frame).
    private var consumed = 0

    /// Parses one whole frame off `received` (from `consumed`), or nil if it has not all arrived.
    private func nextFrame() throws -> (Int, Command, [UInt8])? {
        // TXNR SP COMMAND SP DATALEN [SP DATA] LF; a header is short: 9 + 1 + 32 + 1 + 9 bytes at most
        let malformed = Failure.protocolError("a malformed RELP frame from the server")
        let start = consumed
        var spaces = (0, 0), found = 0  // offsets of the two spaces
        var index = start
        while index < received.count && found < 2 {
            if received[index] == 0x20 {
                if found == 0 { spaces.0 = index } else { spaces.1 = index }
                found += 1
            }
            index += 1
            if index - start > 64 { throw malformed }
        }
        guard found == 2 else { return nil }
        var lengthEnd = index
        while lengthEnd < received.count && received[lengthEnd] >= 0x30 && received[lengthEnd] <= 0x39 { lengthEnd += 1 }
        guard lengthEnd < received.count else {
            if lengthEnd - index > 9 { throw malformed }
            return nil
        }
        guard let number = Self.decimal(received[start..<spaces.0]), number <= 999_999_999,
              let length = Self.decimal(received[index..<lengthEnd]), length <= 1 << 20 else {
            throw malformed
        }
        let name = received[(spaces.0 + 1)..<spaces.1]
        let command: Command = name.elementsEqual("rsp".utf8) ? .rsp : name.elementsEqual("serverclose".utf8) ? .serverclose : .other(Self.text(name))
        let dataStart = length == 0 ? lengthEnd : lengthEnd + 1
        guard received.count >= dataStart + length + 1 else { return nil }
        if length > 0 && received[lengthEnd] != 0x20 { throw malformed }
        // librelp ends a frame with LF; a zero-length frame may come as "DATALEN LF" or "DATALEN SP LF"
        var trailer = dataStart + length
        if length == 0 && received[trailer] == 0x20 && received.count > trailer + 1 { trailer += 1 }
        guard received[trailer] == 0x0A else { throw malformed }
        let data = Array(received[dataStart..<(dataStart + length)])
        consumed = trailer + 1
        if consumed == received.count {
            received.removeAll(keepingCapacity: true)
            consumed = 0
        }
        return (number, command, data)
    }

    /// The commands a server sends.
    private enum Command {
        case rsp
        case serverclose
        case other(String)
    }

    /// 1 to 9 decimal digits, nothing else.
    private static func decimal(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 9 else { return nil }
        var value = 0
        for digit in digits {
            guard digit &- 0x30 < 10 else { return nil }
            value = value * 10 + Int(digit &- 0x30)
        }
        return value
    }

    private static func text(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
    }
}
