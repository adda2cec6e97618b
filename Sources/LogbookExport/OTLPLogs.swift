import Foundation
import Logbook

/// Log entries as an OTLP/HTTP body (`ExportLogsServiceRequest` for `POST /v1/logs`), typed: in
/// protobuf (the default, ``protobufBody(for:observedNanoseconds:)``) or JSON
/// (``body(for:observedNanoseconds:)``), the same message either way.
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
    /// How a body is written: OTLP/HTTP's binary protobuf (`application/x-protobuf`, what
    /// collectors default to, and the only one some take) or its JSON mapping (`application/json`).
    public enum Format: String, Sendable, CaseIterable {
        case protobuf
        case json

        /// The body's `Content-Type`.
        public var contentType: String {
            switch self {
            case .protobuf: "application/x-protobuf"
            case .json: "application/json"
            }
        }
    }

    /// The format of the bodies ``encode(_:observedNanoseconds:)`` writes (protobuf by default).
    public var format: Format = .protobuf
    public var serviceName: String
    public var hostName: String
    /// `process.executable.name` for every process; when nil, the name from `executableNames`.
    public var executableName: String?
    /// `process.executable.name` by process id (the `Exporter` fills it from the sessions the
    /// reader found: the last path component of each session's executable).
    public var executableNames: [UInt32: String] = [:]

    public init(serviceName: String, hostName: String? = nil, executableName: String? = nil, format: Format = .protobuf) {
        self.format = format
        self.serviceName = serviceName
        self.hostName = hostName ?? ProcessInfo.processInfo.hostName
        self.executableName = executableName
    }

    /// Attribute names a record's own fields use; a metadata key that is one of them (or empty,
    /// or already used by the record) is sent as `metadata.KEY` (then `metadata.KEY.2` …):
    /// OpenTelemetry wants the keys of a record's attributes unique and non-empty.
    public static let reservedAttributeNames: Set<String> = [
        "logbook.arguments", "exception.type", "exception.message", "code.file.path", "code.line.number",
        "code.column.number", "code.function.name", "thread.id",
    ]

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

    /// The request body for `entries` in this encoding's ``format``.
    public func encode(_ entries: [LogEntry], observedNanoseconds: Int64) -> [UInt8] {
        encode(entries[...], observedNanoseconds: observedNanoseconds)
    }

    /// The request body for a slice of entries (the exporter's batches: no copy of the records).
    func encode(_ entries: ArraySlice<LogEntry>, observedNanoseconds: Int64) -> [UInt8] {
        switch format {
        case .protobuf: protobufBody(for: entries, observedNanoseconds: observedNanoseconds)
        case .json: body(for: entries, observedNanoseconds: observedNanoseconds)
        }
    }

    /// The request body for `entries` as OTLP/HTTP JSON, observed at `observedNanoseconds` (when
    /// the exporter read them).
    public func body(for entries: [LogEntry], observedNanoseconds: Int64) -> [UInt8] {
        body(for: entries[...], observedNanoseconds: observedNanoseconds)
    }

    func body(for entries: ArraySlice<LogEntry>, observedNanoseconds: Int64) -> [UInt8] {
        var json = JSONWriter()
        json.raw("{\"resourceLogs\":[")
        for (p, process) in Self.groups(of: entries).enumerated() {
            if p > 0 { json.raw(",") }
            json.raw("{\"resource\":{\"attributes\":[")
            json.attribute("service.name", string: serviceName, first: true)
            json.attribute("host.name", string: hostName)
            json.raw(",{\"key\":\"process.pid\",\"value\":")
            json.intValue(Int64(process.pid))
            json.raw("}")
            if let executable = executableName ?? executableNames[process.pid] {
                json.attribute("process.executable.name", string: executable)
            }
            json.raw("]},\"scopeLogs\":[")
            for (l, scope) in process.loggers.enumerated() {
                if l > 0 { json.raw(",") }
                json.raw("{\"scope\":{\"name\":")
                json.string(scope.logger)
                json.raw("},\"logRecords\":[")
                for (r, index) in scope.records.enumerated() {
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

    /// Entries grouped by process, then by logger, each group in the order of its first entry:
    /// one `ResourceLogs` per process, one `ScopeLogs` per logger.
    static func groups(of entries: ArraySlice<LogEntry>) -> [(pid: UInt32, loggers: [(logger: String, records: [Int])])] {
        // The usual batch: one process, one logger (no hashing).
        if let first = entries.first {
            let logger = first.logger
            var same = true
            for index in entries.indices where entries[index].processID != first.processID || entries[index].logger != logger {
                same = false
                break
            }
            if same { return [(first.processID, [(logger ?? "", Array(entries.indices))])] }
        }
        var processes: [UInt32: Int] = [:]
        var result: [(pid: UInt32, loggers: [(logger: String, records: [Int])])] = []
        var scopes: [[String: Int]] = []
        for index in entries.indices {
            let entry = entries[index]
            let logger = entry.logger ?? ""
            let p: Int
            if let known = processes[entry.processID] { p = known } else {
                p = result.count
                processes[entry.processID] = p
                result.append((entry.processID, []))
                scopes.append([:])
            }
            if let l = scopes[p][logger] {
                result[p].loggers[l].records.append(index)
            } else {
                scopes[p][logger] = result[p].loggers.count
                result[p].loggers.append((logger, [index]))
            }
        }
        return result
    }

    /// The attribute names of a record's metadata, in order: unique and non-empty, none of the
    /// names its own fields use (`reservedAttributeNames`): such a key is sent as `metadata.KEY`
    /// (then `metadata.KEY.2` …). Cheap for the usual record: a reserved name contains a dot, and
    /// the names used so far are few (a linear search, no hashing).
    static func attributeNames(of pairs: [LogMetadata.Pair]) -> [String] {
        if pairs.count == 1, let key = pairs.first?.key, !key.isEmpty,
           !(key.utf8.contains(UInt8(ascii: ".")) && reservedAttributeNames.contains(key)) {
            return [key]  // the usual record: one key, usable as it is
        }
        var used: [String] = []
        used.reserveCapacity(pairs.count)
        func taken(_ name: String) -> Bool {
            (name.utf8.contains(UInt8(ascii: ".")) && reservedAttributeNames.contains(name)) || used.contains(name)
        }
        for pair in pairs {
            var name = pair.key
            if name.isEmpty || taken(name) {
                name = "metadata." + pair.key
                var suffix = 2
                while taken(name) {
                    name = "metadata." + pair.key + "." + String(suffix)
                    suffix += 1
                }
            }
            used.append(name)
        }
        return used
    }

    private func record(_ entry: LogEntry, observedNanoseconds: Int64, into json: inout JSONWriter) {
        let (number, text) = Self.severity(of: entry.level)
        json.raw("{\"timeUnixNano\":")
        json.unsignedString(UInt64(max(0, entry.wallNanoseconds)))
        json.raw(",\"observedTimeUnixNano\":")
        json.unsignedString(UInt64(max(0, observedNanoseconds)))
        json.raw(",\"severityNumber\":")
        json.renderer.appendInteger(Int64(number))
        json.raw(",\"severityText\":")
        json.string(text)
        json.raw(",\"body\":{\"stringValue\":\"")
        json.renderer.appendJSONEscapedMessage(entry)
        json.raw("\"},\"attributes\":[")
        var first = true
        func key(_ name: String) {
            if first { json.raw("{\"key\":") } else { json.raw(",{\"key\":") }
            first = false
            json.string(name)
            json.raw(",\"value\":")
        }
        func key(_ name: StaticString) {
            if first { json.raw("{\"key\":\"") } else { json.raw(",{\"key\":\"") }
            first = false
            json.raw(name)
            json.raw("\",\"value\":")
        }
        var pairs = entry.metadata.pairs
        let trace = pairs.isEmpty ? nil : TraceContext.find(in: pairs)
        if let trace { pairs.removeAll { trace.keys.contains($0.key) } }
        if !pairs.isEmpty {
            for (name, pair) in zip(Self.attributeNames(of: pairs), pairs) {
                key(name)
                json.value(pair.value)
                json.raw("}")
            }
        }
        if !entry.arguments.isEmpty {
            key("logbook.arguments" as StaticString)
            json.raw("{\"arrayValue\":{\"values\":[")
            for (i, argument) in entry.arguments.enumerated() {
                if i > 0 { json.raw(",") }
                json.value(argument)
            }
            json.raw("]}}}")
        }
        if let error = entry.error {
            key("exception.type" as StaticString)
            json.anyString(error.type)
            json.raw("}")
            key("exception.message" as StaticString)
            json.anyString(error.description)
            json.raw("}")
        }
        if let file = entry.file {
            key("code.file.path" as StaticString)
            json.anyString(file)
            json.raw("}")
            key("code.line.number" as StaticString)
            json.intValue(Int64(entry.line))
            json.raw("}")
            if entry.column > 0 {
                key("code.column.number" as StaticString)
                json.intValue(Int64(entry.column))
                json.raw("}")
            }
        }
        if let function = entry.function {
            key("code.function.name" as StaticString)
            json.anyString(function)
            json.raw("}")
        }
        key("thread.id" as StaticString)
        json.intValue(Int64(entry.threadID))
        json.raw("}]")
        if let trace {  // OTLP's JSON mapping writes ids in hex, not base64
            json.raw(",\"traceId\":\"")
            json.hex(trace.traceID)
            json.raw("\",\"spanId\":\"")
            json.hex(trace.spanID)
            json.raw("\",\"flags\":")
            json.renderer.appendInteger(Int64(trace.flags))
        }
        json.raw("}")
    }
}

/// OTLP's JSON written straight into bytes through Logbook's LineRenderer (its JSON escaping, its
/// integer formatting: no intermediate strings).
struct JSONWriter {
    var renderer = LineRenderer(capacity: 1 << 16)
    var bytes: [UInt8] { renderer.bytes }

    mutating func raw(_ text: StaticString) { renderer.appendLiteral(text) }

    mutating func string(_ text: String) { renderer.appendJSONString(text) }

    /// An int64 as OTLP's JSON wants it: a decimal string.
    mutating func intValue(_ value: Int64) {
        raw("{\"intValue\":\"")
        renderer.appendInteger(value)
        raw("\"}")
    }

    mutating func hex(_ bytes: [UInt8]) {
        let digits: StaticString = "0123456789abcdef"
        digits.withUTF8Buffer { table in
            for byte in bytes {
                renderer.bytes.append(table[Int(byte >> 4)])
                renderer.bytes.append(table[Int(byte & 15)])
            }
        }
    }

    mutating func unsignedString(_ value: UInt64) {
        renderer.bytes.append(34)
        renderer.appendUnsigned(value)
        renderer.bytes.append(34)
    }

    mutating func attribute(_ key: StaticString, string value: String, first: Bool = false) {
        if first { raw("{\"key\":\"") } else { raw(",{\"key\":\"") }
        raw(key)
        raw("\",\"value\":")
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
        else if value.isInfinite { if value > 0 { raw("{\"doubleValue\":\"Infinity\"}") } else { raw("{\"doubleValue\":\"-Infinity\"}") } }
        else {
            raw("{\"doubleValue\":")
            renderer.bytes += value.description.utf8
            raw("}")
        }
    }

    mutating func value(_ value: LogValue) {
        switch value {
        case .bool(let flag): if flag { raw("{\"boolValue\":true}") } else { raw("{\"boolValue\":false}") }
        case .signed(let number, _): intValue(number)
        case .unsigned(let number, _):
            // intValue is an int64: a larger unsigned value goes as its decimal text
            if number <= UInt64(Int64.max) { intValue(Int64(number)) } else {
                raw("{\"stringValue\":")
                unsignedString(number)
                raw("}")
            }
        case .float(let number): double(Double(number))
        case .double(let number): double(number)
        case .string(let text, _): anyString(text)
        case .bytes(let data):
            raw("{\"bytesValue\":\"")
            renderer.bytes += Data(data).base64EncodedString().utf8
            raw("\"}")
        case .redacted: raw("{\"stringValue\":\"<private>\"}")
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
                if i > 0 { raw(",{\"key\":") } else { raw("{\"key\":") }
                string(pair.key)
                raw(",\"value\":")
                self.value(pair.value)
                raw("}")
            }
            raw("]}}")
        }
    }
}
