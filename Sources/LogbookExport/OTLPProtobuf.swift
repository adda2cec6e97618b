import Foundation
import Logbook

extension OTLPLogsEncoding {
    /// The request body for `entries` as OTLP/HTTP protobuf (`application/x-protobuf`): the same
    /// `ExportLogsServiceRequest` as ``body(for:observedNanoseconds:)`` writes in JSON, field for
    /// field (opentelemetry-proto's `logs.proto`, `common.proto`, `resource.proto`), written straight
    /// into one byte buffer: no message object per record.
    public func protobufBody(for entries: [LogEntry], observedNanoseconds: Int64) -> [UInt8] {
        protobufBody(for: entries[...], observedNanoseconds: observedNanoseconds)
    }

    func protobufBody(for entries: ArraySlice<LogEntry>, observedNanoseconds: Int64) -> [UInt8] {
        var out = ProtobufWriter()
        for process in Self.groups(of: entries) {
            let resourceLogs = out.beginMessage(1)  // ExportLogsServiceRequest.resource_logs
            let resource = out.beginMessage(1)      // ResourceLogs.resource
            out.stringAttribute(1, "service.name", serviceName)  // Resource.attributes
            out.stringAttribute(1, "host.name", hostName)
            let pid = out.beginMessage(1)
            out.string(1, "process.pid")
            let value = out.beginMessage(2)
            out.int64(3, Int64(process.pid))
            out.endMessage(value)
            out.endMessage(pid)
            if let executable = executableName ?? executableNames[process.pid] {
                out.stringAttribute(1, "process.executable.name", executable)
            }
            out.endMessage(resource)
            for scope in process.loggers {
                let scopeLogs = out.beginMessage(2)  // ResourceLogs.scope_logs
                let instrumentationScope = out.beginMessage(1)
                out.string(1, scope.logger, always: false)
                out.endMessage(instrumentationScope)
                entries.withUnsafeBufferPointer { buffer in  // records read in place, never copied
                    for index in scope.records {
                        record(buffer[index - entries.startIndex], observedNanoseconds: observedNanoseconds, into: &out)
                    }
                }
                out.endMessage(scopeLogs)
            }
            out.endMessage(resourceLogs)
        }
        return out.renderer.bytes
    }

    /// One `LogRecord` (ScopeLogs.log_records, field 2).
    private func record(_ entry: borrowing LogEntry, observedNanoseconds: Int64, into out: inout ProtobufWriter) {
        let record = out.beginMessage(2)
        out.fixed64(1, UInt64(max(0, entry.wallNanoseconds)))                    // time_unix_nano
        let (number, text) = Self.severity(of: entry.level)
        out.uint64(2, UInt64(number))                                           // severity_number
        out.string(3, text)                                                     // severity_text
        let body = out.beginMessage(5)                                          // body: AnyValue
        let message = out.beginMessage(1)                                       // string_value
        out.renderer.appendPlainMessage(entry)
        out.endMessage(message)
        out.endMessage(body)
        var pairs = entry.metadata.pairs                                        // attributes (6)
        let trace = pairs.isEmpty ? nil : TraceContext.find(in: pairs)
        if let trace { pairs.removeAll { trace.keys.contains($0.key) } }
        if !pairs.isEmpty {
            for (name, pair) in zip(Self.attributeNames(of: pairs), pairs) {
                let attribute = out.beginMessage(6)
                out.string(1, name)
                let value = out.beginMessage(2)
                out.metadataValue(pair.value)
                out.endMessage(value)
                out.endMessage(attribute)
            }
        }
        if !entry.arguments.isEmpty {
            let attribute = out.beginMessage(6)
            out.string(1, "logbook.arguments")
            let value = out.beginMessage(2)
            let array = out.beginMessage(5)                                     // array_value
            for argument in entry.arguments {
                let item = out.beginMessage(1)
                out.value(argument)
                out.endMessage(item)
            }
            out.endMessage(array)
            out.endMessage(value)
            out.endMessage(attribute)
        }
        if let error = entry.error {
            out.stringAttribute(6, "exception.type", error.type)
            out.stringAttribute(6, "exception.message", error.description)
        }
        if let file = entry.file {
            out.stringAttribute(6, "code.file.path", file)
            out.intAttribute(6, "code.line.number", Int64(entry.line))
            if entry.column > 0 { out.intAttribute(6, "code.column.number", Int64(entry.column)) }
        }
        if let function = entry.function { out.stringAttribute(6, "code.function.name", function) }
        out.intAttribute(6, "thread.id", Int64(entry.threadID))
        if let trace {
            out.fixed32(8, trace.flags)                                         // flags
            out.bytes(9, trace.traceID)                                         // trace_id
            out.bytes(10, trace.spanID)                                         // span_id
        }
        out.fixed64(11, UInt64(max(0, observedNanoseconds)))                    // observed_time_unix_nano
        out.endMessage(record)
    }
}

/// Protocol buffers' wire format written into LineRenderer's buffer (so that a message renders
/// straight into it). A nested message's length goes before it: one byte is reserved, and the
/// rare message of 128 bytes or more moves right by the varint's extra bytes when it ends.
struct ProtobufWriter {
    var renderer = LineRenderer(capacity: 1 << 16)

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            renderer.bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        renderer.bytes.append(UInt8(value))
    }

    mutating func key(_ field: Int, _ wireType: Int) { varint(UInt64(field << 3 | wireType)) }

    mutating func uint64(_ field: Int, _ value: UInt64) {
        key(field, 0)
        varint(value)
    }

    /// An int64 field: two's complement in a varint (a negative value takes 10 bytes).
    mutating func int64(_ field: Int, _ value: Int64) { uint64(field, UInt64(bitPattern: value)) }

    mutating func fixed32(_ field: Int, _ value: UInt32) {
        key(field, 5)
        withUnsafeBytes(of: value.littleEndian) { renderer.bytes.append(contentsOf: $0) }
    }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        key(field, 1)
        withUnsafeBytes(of: value.littleEndian) { renderer.bytes.append(contentsOf: $0) }
    }

    /// A string field; an empty one is left out unless `always` (proto3 would not send it either).
    mutating func string(_ field: Int, _ text: String, always: Bool = true) {
        var text = text
        text.withUTF8 { utf8 in
            guard always || !utf8.isEmpty else { return }
            key(field, 2)
            varint(UInt64(utf8.count))
            renderer.bytes.append(contentsOf: utf8)
        }
    }

    mutating func bytes(_ field: Int, _ data: [UInt8]) {
        key(field, 2)
        varint(UInt64(data.count))
        renderer.bytes.append(contentsOf: data)
    }

    /// Starts a length-delimited field; returns where its content starts, for ``endMessage(_:)``.
    mutating func beginMessage(_ field: Int) -> Int {
        key(field, 2)
        renderer.bytes.append(0)
        return renderer.bytes.count
    }

    mutating func endMessage(_ start: Int) {
        let length = renderer.bytes.count - start
        if length < 0x80 {
            renderer.bytes[start - 1] = UInt8(length)
            return
        }
        var prefix: [UInt8] = []
        var value = UInt64(length)
        while value >= 0x80 {
            prefix.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        prefix.append(UInt8(value))
        renderer.bytes.replaceSubrange((start - 1)..<start, with: prefix)
    }

    /// A KeyValue whose value is a string (`field`: the repeated KeyValue field of its parent).
    mutating func stringAttribute(_ field: Int, _ name: StaticString, _ text: String) {
        attribute(field, name) { $0.string(1, text) }
    }

    mutating func intAttribute(_ field: Int, _ name: StaticString, _ number: Int64) {
        attribute(field, name) { $0.int64(3, number) }
    }

    /// A KeyValue named `name`, its AnyValue's content written by `value`.
    private mutating func attribute(_ field: Int, _ name: StaticString, _ value: (inout ProtobufWriter) -> Void) {
        let attribute = beginMessage(field)
        key(1, 2)
        varint(UInt64(name.utf8CodeUnitCount))
        renderer.appendLiteral(name)
        let content = beginMessage(2)
        value(&self)
        endMessage(content)
        endMessage(attribute)
    }

    /// An AnyValue's content for a typed value (as the JSON encoding: an unsigned value beyond
    /// int64 as its decimal text, a redacted one as "<private>").
    mutating func value(_ value: LogValue) {
        switch value {
        case .bool(let flag): uint64(2, flag ? 1 : 0)
        case .signed(let number, _): int64(3, number)
        case .unsigned(let number, _):
            if number <= UInt64(Int64.max) { int64(3, Int64(number)) } else { string(1, String(number)) }
        case .float(let number): fixed64(4, Double(number).bitPattern)
        case .double(let number): fixed64(4, number.bitPattern)
        case .string(let text, _): string(1, text)
        case .bytes(let data): bytes(7, data)
        case .redacted: string(1, "<private>")
        }
    }

    mutating func metadataValue(_ value: LogMetadataValue) {
        switch value {
        case .value(let scalar): self.value(scalar)
        case .list(let items):
            let array = beginMessage(5)
            for item in items {
                let element = beginMessage(1)
                metadataValue(item)
                endMessage(element)
            }
            endMessage(array)
        case .map(let pairs):
            let list = beginMessage(6)
            for pair in pairs.pairs {
                let keyValue = beginMessage(1)
                string(1, pair.key)
                let element = beginMessage(2)
                metadataValue(pair.value)
                endMessage(element)
                endMessage(keyValue)
            }
            endMessage(list)
        }
    }
}
