import Foundation
import Logbook

/// Log entries as an OTLP/HTTP JSON body (`ExportLogsServiceRequest` for `POST /v1/logs`), typed.
/// WORK IN PROGRESS (issue 14; docs/EXPORT-PLAN.md): the encoder only, not yet the delivery.
///
/// One `ResourceLogs` per process that wrote the entries (service.name, host.name, process.pid,
/// process.executable.name), one `ScopeLogs` per logger, and per record: `timeUnixNano` and
/// `observedTimeUnixNano` as decimal strings, severity by the OpenTelemetry specification's mapping,
/// the rendered message as body, and attributes with their types kept: metadata (nested maps as
/// `kvlistValue`, lists as `arrayValue`, integers as `intValue`), the message's arguments
/// (`logbook.arguments`), the error (`exception.type`, `exception.message`), the call site
/// (`code.file.path`, `code.line.number`, `code.column.number`, `code.function.name`) and
/// `thread.id`. Redacted values stay `<private>`.
public struct OTLPLogsEncoding: Sendable {
    public var serviceName: String
    public var hostName: String
    public var executableName: String?

    public init(serviceName: String, hostName: String? = nil, executableName: String? = nil) {
        self.serviceName = serviceName
        self.hostName = hostName ?? ProcessInfo.processInfo.hostName
        self.executableName = executableName
    }

    /// OpenTelemetry's SeverityNumber and short name for a Logbook level (the specification's
    /// mapping appendix): trace 1 TRACE, debug 5 DEBUG, info 9 INFO, notice 10 INFO2, warning 13
    /// WARN, error 17 ERROR, critical 18 ERROR2.
    public static func severity(of level: LogLevel?) -> (number: Int, text: String) {
        switch level {
        case .trace: (1, "TRACE")
        case .debug: (5, "DEBUG")
        case .info: (9, "INFO")
        case .notice: (10, "INFO2")
        case .warning: (13, "WARN")
        case .error: (17, "ERROR")
        case .critical: (18, "ERROR2")
        case nil: (0, "UNSPECIFIED")
        }
    }

    /// The request body for `entries`, observed at `observedNanoseconds` (when the exporter read them).
    public func body(for entries: [LogEntry], observedNanoseconds: Int64) -> [UInt8] {
        var json = JSONWriter()
        json.raw("{\"resourceLogs\":[")
        // entries grouped by process, then by logger, each group in the order of its first entry
        var processes: [UInt32: [String: [Int]]] = [:], processOrder: [UInt32] = [], loggerOrder: [UInt32: [String]] = [:]
        for (index, entry) in entries.enumerated() {
            let logger = entry.logger ?? ""
            if processes[entry.processID] == nil {
                processes[entry.processID] = [:]
                processOrder.append(entry.processID)
            }
            if processes[entry.processID]![logger] == nil {
                processes[entry.processID]![logger] = []
                loggerOrder[entry.processID, default: []].append(logger)
            }
            processes[entry.processID]![logger]!.append(index)
        }
        for (p, pid) in processOrder.enumerated() {
            if p > 0 { json.raw(",") }
            json.raw("{\"resource\":{\"attributes\":[")
            json.attribute("service.name", string: serviceName, first: true)
            json.attribute("host.name", string: hostName)
            json.raw(",{\"key\":\"process.pid\",\"value\":{\"intValue\":\"\(pid)\"}}")
            if let executableName { json.attribute("process.executable.name", string: executableName) }
            json.raw("]},\"scopeLogs\":[")
            for (l, logger) in loggerOrder[pid, default: []].enumerated() {
                if l > 0 { json.raw(",") }
                json.raw("{\"scope\":{\"name\":")
                json.string(logger)
                json.raw("},\"logRecords\":[")
                for (r, index) in processes[pid]![logger]!.enumerated() {
                    if r > 0 { json.raw(",") }
                    record(entries[index], observedNanoseconds: observedNanoseconds, into: &json)
                }
                json.raw("]}")
            }
            json.raw("]}")
        }
        json.raw("]}")
        return json.bytes
    }

    private func record(_ entry: LogEntry, observedNanoseconds: Int64, into json: inout JSONWriter) {
        let (number, text) = Self.severity(of: entry.level)
        json.raw("{\"timeUnixNano\":\"\(UInt64(max(0, entry.wallNanoseconds)))\",")
        json.raw("\"observedTimeUnixNano\":\"\(UInt64(max(0, observedNanoseconds)))\",")
        json.raw("\"severityNumber\":\(number),\"severityText\":\"\(text)\",\"body\":{\"stringValue\":")
        json.string(entry.message)
        json.raw("},\"attributes\":[")
        var first = true
        func key(_ name: String) {
            json.raw(first ? "{\"key\":" : ",{\"key\":")
            first = false
            json.string(name)
            json.raw(",\"value\":")
        }
        for pair in entry.metadata.pairs {
            key(pair.key)
            json.value(pair.value)
            json.raw("}")
        }
        if !entry.arguments.isEmpty {
            key("logbook.arguments")
            json.raw("{\"arrayValue\":{\"values\":[")
            for (i, argument) in entry.arguments.enumerated() {
                if i > 0 { json.raw(",") }
                json.value(argument)
            }
            json.raw("]}}}")
        }
        if let error = entry.error {
            key("exception.type")
            json.anyString(error.type)
            json.raw("}")
            key("exception.message")
            json.anyString(error.description)
            json.raw("}")
        }
        if let file = entry.file {
            key("code.file.path")
            json.anyString(file)
            json.raw("}")
            key("code.line.number")
            json.raw("{\"intValue\":\"\(entry.line)\"}}")
            if entry.column > 0 {
                key("code.column.number")
                json.raw("{\"intValue\":\"\(entry.column)\"}}")
            }
        }
        if let function = entry.function {
            key("code.function.name")
            json.anyString(function)
            json.raw("}")
        }
        key("thread.id")
        json.raw("{\"intValue\":\"\(entry.threadID)\"}}")
        json.raw("]}")
    }
}

/// A small JSON writer: strings escaped as RFC 8259 wants, values as OTLP's `AnyValue`.
struct JSONWriter {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(4096) }

    mutating func raw(_ text: String) { bytes += text.utf8 }

    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func attribute(_ key: String, string value: String, first: Bool = false) {
        raw(first ? "{\"key\":" : ",{\"key\":")
        string(key)
        raw(",\"value\":")
        anyString(value)
        raw("}")
    }

    mutating func anyString(_ text: String) {
        raw("{\"stringValue\":")
        string(text)
        raw("}")
    }

    /// A double as protobuf's JSON mapping writes it: a number, or "NaN", "Infinity", "-Infinity".
    mutating func double(_ value: Double) {
        if value.isNaN { raw("{\"doubleValue\":\"NaN\"}") }
        else if value.isInfinite { raw(value > 0 ? "{\"doubleValue\":\"Infinity\"}" : "{\"doubleValue\":\"-Infinity\"}") }
        else { raw("{\"doubleValue\":\(value)}") }
    }

    mutating func value(_ value: LogValue) {
        switch value {
        case .bool(let flag): raw(flag ? "{\"boolValue\":true}" : "{\"boolValue\":false}")
        case .signed(let number, _): raw("{\"intValue\":\"\(number)\"}")
        case .unsigned(let number, _):
            // intValue is an int64: a larger unsigned value goes as its decimal text
            if number <= UInt64(Int64.max) { raw("{\"intValue\":\"\(number)\"}") } else { anyString(String(number)) }
        case .float(let number): double(Double(number))
        case .double(let number): double(number)
        case .string(let text, _): anyString(text)
        case .bytes(let data): raw("{\"bytesValue\":\"\(Data(data).base64EncodedString())\"}")
        case .redacted: anyString("<private>")
        }
    }

    mutating func value(_ value: LogMetadataValue) {
        switch value {
        case .value(let scalar): self.value(scalar)
        case .list(let items):
            raw("{\"arrayValue\":{\"values\":[")
            for (i, item) in items.enumerated() {
                if i > 0 { raw(",") }
                self.value(item)
            }
            raw("]}}")
        case .map(let pairs):
            raw("{\"kvlistValue\":{\"values\":[")
            for (i, pair) in pairs.pairs.enumerated() {
                raw(i > 0 ? ",{\"key\":" : "{\"key\":")
                string(pair.key)
                raw(",\"value\":")
                self.value(pair.value)
                raw("}")
            }
            raw("]}}")
        }
    }
}
