import Foundation

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
        guard answer.starts(with: Array("200".utf8)) else {
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

    /// Sends `messages` (RFC 5424 messages, unframed) in order, `window` at a time, and returns how
    /// many of them, from the first, the server acknowledged. Throws only for a refused message
    /// (a status other than 200, with the server's text) after the acknowledged ones; a broken
    /// connection returns the count so far and ends the session.
    func send(_ messages: [[UInt8]]) throws -> Int {
        var acknowledged = 0
        while acknowledged < messages.count {
            let end = min(messages.count, acknowledged + window)
            var transactions: [Int] = []
            var bytes: [UInt8] = []
            for message in messages[acknowledged..<end] {
                transactions.append(nextTransaction)
                appendFrame(nextTransaction, "syslog", message, to: &bytes)
                nextTransaction = nextTransaction == 999_999_999 ? 1 : nextTransaction + 1
            }
            guard connection.send(bytes, checkingAfter: false) else {
                self.end()
                return acknowledged
            }
            for txnr in transactions {
                let answer: [UInt8]
                do { answer = try awaitResponse(txnr) } catch {
                    self.end()
                    return acknowledged
                }
                guard answer.starts(with: Array("200".utf8)) else {
                    self.end()
                    throw Failure.refused(Self.text(answer))
                }
                acknowledged += 1
            }
        }
        return acknowledged
    }

    private func appendFrame(_ txnr: Int, _ command: String, _ data: [UInt8], to bytes: inout [UInt8]) {
        bytes += Array("\(txnr) \(command) \(data.count)".utf8)
        if !data.isEmpty {
            bytes.append(0x20)
            bytes += data
        }
        bytes.append(0x0A)
    }

    private func sendFrame(_ command: String, _ data: [UInt8]) throws -> Int {
        let txnr = nextTransaction
        nextTransaction += 1
        var bytes: [UInt8] = []
        appendFrame(txnr, command, data, to: &bytes)
        guard connection.send(bytes, checkingAfter: false) else { throw Failure.connection("the RELP server at \(connection.host):\(connection.port) closed the connection") }
        return txnr
    }

    /// The data of the `rsp` frame for `txnr`; throws when the connection ends, the server closes
    /// the session, a frame is malformed or answers another transaction, or nothing comes in time.
    private func awaitResponse(_ txnr: Int, timeout: Double? = nil) throws -> [UInt8] {
        let timeout = timeout ?? self.timeout
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let (number, command, data) = try nextFrame() {
                if command == "serverclose" {
                    throw Failure.connection("the RELP server closed the session")
                }
                guard command == "rsp" else { throw Failure.protocolError("unexpected RELP frame '\(command)' from the server") }
                guard number == txnr else { throw Failure.protocolError("RELP response to transaction \(number), expected \(txnr)") }
                return data
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw Failure.connection("no RELP acknowledgement in \(Int(timeout)) s") }
            guard let more = connection.receive(timeout: left) else {
                throw Failure.connection("the RELP server at \(connection.host):\(connection.port) closed the connection")
            }
            received += more
        }
    }

    /// Parses one whole frame off `received`, or nil if it has not all arrived.
    private func nextFrame() throws -> (Int, String, [UInt8])? {
        // TXNR SP COMMAND SP DATALEN [SP DATA] LF; a header is short: 9 + 1 + 32 + 1 + 9 bytes at most
        var fields: [Int] = []  // offsets of the two spaces
        var index = 0
        while index < received.count && fields.count < 2 {
            if received[index] == 0x20 { fields.append(index) }
            index += 1
            if index > 64 { throw Failure.protocolError("a malformed RELP frame from the server") }
        }
        guard fields.count == 2 else { return nil }
        var lengthEnd = index
        while lengthEnd < received.count && received[lengthEnd] >= 0x30 && received[lengthEnd] <= 0x39 { lengthEnd += 1 }
        guard lengthEnd < received.count else {
            if lengthEnd - index > 9 { throw Failure.protocolError("a malformed RELP frame from the server") }
            return nil
        }
        guard let number = Int(Self.text(received[0..<fields[0]])), (0...999_999_999).contains(number),
              let length = Int(Self.text(received[index..<lengthEnd])), length <= 1 << 20, lengthEnd > index else {
            throw Failure.protocolError("a malformed RELP frame from the server")
        }
        let command = Self.text(received[(fields[0] + 1)..<fields[1]])
        let dataStart = length == 0 ? lengthEnd : lengthEnd + 1
        guard received.count >= dataStart + length + 1 else { return nil }
        if length > 0 && received[lengthEnd] != 0x20 { throw Failure.protocolError("a malformed RELP frame from the server") }
        // librelp ends a frame with LF; a zero-length frame may come as "DATALEN LF" or "DATALEN SP LF"
        var trailer = dataStart + length
        if length == 0 && received[trailer] == 0x20 && received.count > trailer + 1 { trailer += 1 }
        guard received[trailer] == 0x0A else { throw Failure.protocolError("a malformed RELP frame from the server") }
        let data = Array(received[dataStart..<(dataStart + length)])
        received.removeFirst(trailer + 1)
        return (number, command, data)
    }

    private static func text(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
    }
}
