/// Renders entries as lines of text or JSON straight into a byte buffer: the one formatter behind
/// ``LogEntry/textLine(includeSource:)``, ``LogEntry/jsonLine()`` and the CLI.
/// No intermediate strings for numbers, timestamps or escaping.
public struct LineRenderer {
    /// The rendered bytes (UTF-8), one line per `append` call, each ended by "\n".
    public var bytes: [UInt8] = []
    /// Scratch line and per-site bytes for rendering a ``LogRecord`` (made on first use).
    var recordScratch: Unmanaged<RecordScratch> {
        mutating get {
            if let scratch = _recordScratch { return scratch }
            let scratch = RecordScratch()
            recordScratchOwner = scratch
            _recordScratch = Unmanaged.passUnretained(scratch)
            return _recordScratch!
        }
    }
    private var recordScratchOwner: RecordScratch?
    private var _recordScratch: Unmanaged<RecordScratch>?

    public init(capacity: Int = 1 << 16) { bytes.reserveCapacity(capacity) }

    public mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    public enum Format: Sendable {
        /// `TIME LEVEL LOGGER: MESSAGE`, control characters escaped for a terminal.
        case text(includeSource: Bool)
        /// One JSON object (see ``LogEntry/jsonLine()``).
        case json
    }

    public mutating func append(_ entry: LogEntry, as format: Format) {
        switch format {
        case .text(let includeSource): appendText(entry, includeSource: includeSource)
        case .json: appendJSON(entry)
        }
        bytes.append(10)
    }

    // MARK: text

    mutating func appendText(_ entry: LogEntry, includeSource: Bool) {
        appendTimestamp(entry.wallNanoseconds)
        bytes.append(32)
        let level = entry.levelName
        appendString(level)
        for _ in level.utf8.count..<max(8, level.utf8.count) { bytes.append(32) }
        bytes.append(32)
        appendEscaped(entry.logger ?? "?", .terminal)
        appendLiteral(": ")
        appendMessage(entry, .terminal)
        for pair in entry.metadata {
            bytes.append(32)
            appendMetadataKey(pair.key, .terminal)
            bytes.append(61)
            appendMetadataText(pair.value, .terminal)
        }
        if let error = entry.error {
            appendLiteral(" error=")
            appendEscaped(error.type, .terminal)
            appendLiteral(": ")
            appendEscaped(error.description, .terminal)
        }
        if includeSource {
            appendLiteral("  (")
            appendEscaped(entry.file ?? "?", .terminal)
            bytes.append(58)
            appendInteger(Int64(entry.line))
            appendLiteral(" thread ")
            appendInteger(Int64(entry.threadID))
            bytes.append(41)
        }
    }

    // MARK: JSON

    mutating func appendJSON(_ entry: LogEntry) {
        appendLiteral(#"{"time":""#)
        appendTimestamp(entry.wallNanoseconds)
        appendLiteral(#"","level":""#)
        appendString(entry.levelName)
        appendLiteral(#"","logger":"#)
        appendJSONString(entry.logger)
        appendLiteral(#","message":""#)
        appendMessage(entry, .json)
        appendLiteral(#"","args":["#)
        for (index, value) in entry.arguments.enumerated() {
            if index > 0 { bytes.append(44) }
            appendLiteral(#"{"type":""#)
            appendString(value.type.name)
            bytes.append(34)
            if case .redacted = value { appendLiteral(#","redacted":true"#) }
            appendLiteral(#","value":"#)
            appendJSONValue(value)
            bytes.append(125)
        }
        appendLiteral(#"],"metadata":"#)
        appendJSONMetadata(entry.metadata)
        if let error = entry.error {
            appendLiteral(#","error":{"type":"#)
            appendJSONString(error.type)
            appendLiteral(#","description":"#)
            appendJSONString(error.description)
            bytes.append(125)
        }
        if let source = entry.source {
            appendLiteral(#","source":"#)
            appendJSONString(source)
        }
        appendLiteral(#","file":"#)
        appendJSONString(entry.file)
        appendLiteral(#","line":"#)
        appendInteger(Int64(entry.line))
        appendLiteral(#","function":"#)
        appendJSONString(entry.function)
        appendLiteral(#","thread":"#)
        appendInteger(Int64(entry.threadID))
        appendLiteral(#","pid":"#)
        appendInteger(Int64(entry.processID))
        bytes.append(125)
    }

    mutating func appendJSONValue(_ value: LogValue) {
        switch value {
        case .bool(let v): appendLiteral(v ? "true" : "false")
        case .signed(let v, _): appendInteger(v)
        case .unsigned(let v, _): appendUnsigned(v)
        case .string(let v, _):
            bytes.append(34)
            appendEscaped(v, .json)
            bytes.append(34)
        default: appendString(value.jsonValue)
        }
    }

    mutating func appendJSONMetadata(_ metadata: LogMetadata) {
        bytes.append(123)
        for (index, pair) in metadata.enumerated() {
            if index > 0 { bytes.append(44) }
            appendJSONString(pair.key)
            bytes.append(58)
            appendJSONMetadataValue(pair.value)
        }
        bytes.append(125)
    }

    mutating func appendJSONMetadataValue(_ value: LogMetadataValue) {
        switch value {
        case .value(let value): appendJSONValue(value)
        case .map(let metadata): appendJSONMetadata(metadata)
        case .list(let items):
            bytes.append(91)
            for (index, item) in items.enumerated() {
                if index > 0 { bytes.append(44) }
                appendJSONMetadataValue(item)
            }
            bytes.append(93)
        }
    }

    package mutating func appendJSONString(_ text: String?) {
        guard let text else { return appendLiteral("null") }
        bytes.append(34)
        appendEscaped(text, .json)
        bytes.append(34)
    }

    // MARK: pieces

    /// The message: literal segments and argument values, each escaped as it is written. This is
    /// the one place that fills a template: ``LogEntry/message`` and ``renderTemplate(_:_:)`` come
    /// here too. Placeholders are filled in order; arguments beyond them are appended after a
    /// space; placeholders without an argument stay "{}".
    /// The message as the contents of a JSON string (escaped, without the quotes): for exporters.
    package mutating func appendJSONEscapedMessage(_ entry: LogEntry) { appendMessage(entry, .json) }

    /// The message as it is, unescaped (UTF-8): for binary encodings (OTLP protobuf).
    package mutating func appendPlainMessage(_ entry: LogEntry) { appendMessage(entry, .none) }

    mutating func appendMessage(_ entry: LogEntry, _ escaping: Escaping) {
        guard let segments = entry.segments ?? entry.template.map(TemplateSegments.init) else {
            appendLiteral("<unknown call site>")
            for argument in entry.arguments {
                bytes.append(32)
                appendValueText(argument, escaping)
            }
            return
        }
        appendMessage(segments, entry.arguments, escaping)
    }

    mutating func appendMessage(_ segments: TemplateSegments, _ arguments: [LogValue], _ escaping: Escaping) {
        let literals = segments.literals
        appendEscaped(literals[0], escaping)
        for index in 1..<max(literals.count, 1) {
            if index - 1 < arguments.count {
                appendValueText(arguments[index - 1], escaping)
            } else {
                appendLiteral("{}")
            }
            appendEscaped(literals[index], escaping)
        }
        if arguments.count >= literals.count {
            for argument in arguments[(literals.count - 1)...] {
                bytes.append(32)
                appendValueText(argument, escaping)
            }
        }
    }

    mutating func appendValueText(_ value: LogValue, _ escaping: Escaping) {
        switch value {
        case .string(let text, _): appendEscaped(text, escaping)
        case .signed(let v, _): appendInteger(v)
        case .unsigned(let v, _): appendUnsigned(v)
        case .bool(let v): appendLiteral(v ? "true" : "false")
        case .double(let v): appendDouble(v)
        default: appendString(value.description)  // Float, bytes, <private>
        }
    }

    /// `value` as `Double.description` writes it, without making that String for the common
    /// decimals (`LineCursor.putShortDecimal`); others (1e-05, nan, 1.0e+20) through description.
    package mutating func appendDouble(_ value: Double) {
        var scratch: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)  // putShortDecimal writes at most 24
        let written: Bool = withUnsafeMutableBytes(of: &scratch) { raw in
            let start = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var cursor = LineCursor(start)
            guard cursor.putShortDecimal(value) else { return false }
            bytes.append(contentsOf: UnsafeBufferPointer(start: start, count: cursor.pointer - start))
            return true
        }
        if !written { appendString(value.description) }
    }

    /// A metadata value as ``LogMetadataValue/description`` writes it (unescaped), into the buffer.
    package mutating func appendMetadataText(_ value: LogMetadataValue) { appendMetadataText(value, .none) }

    /// A metadata value in a text line: `42`, `GET`, `"two words"`, `[1, 2]`, `{a=1, b=x}`.
    /// Strings are quoted when they are empty or hold a space or one of `"=,[]{}`.
    mutating func appendMetadataText(_ value: LogMetadataValue, _ escaping: Escaping) {
        switch value {
        case .value(.string(let text, _)):
            appendMetadataKey(text, escaping)
        case .value(let scalar):
            appendValueText(scalar, escaping)
        case .list(let items):
            bytes.append(91)
            for (index, item) in items.enumerated() {
                if index > 0 { appendLiteral(", ") }
                appendMetadataText(item, escaping)
            }
            bytes.append(93)
        case .map(let metadata):
            bytes.append(123)
            for (index, pair) in metadata.enumerated() {
                if index > 0 { appendLiteral(", ") }
                appendMetadataKey(pair.key, escaping)
                bytes.append(61)
                appendMetadataText(pair.value, escaping)
            }
            bytes.append(125)
        }
    }

    /// A key or string value of metadata in a text line, quoted when it would not read back as one.
    mutating func appendMetadataKey(_ text: String, _ escaping: Escaping) {
        let needsQuotes = text.isEmpty || text.utf8.contains { byte in
            switch byte {
            case 32, 34, 44, 61, 91, 93, 123, 125, 92: true  // space " , = [ ] { } \
            default: false
            }
        }
        guard needsQuotes else { return appendEscaped(text, escaping) }
        bytes.append(34)
        var quoted = ""
        for character in text.unicodeScalars {
            if character == "\"" || character == "\\" { quoted.unicodeScalars.append("\\") }
            quoted.unicodeScalars.append(character)
        }
        appendEscaped(quoted, escaping)
        bytes.append(34)
    }

    mutating func appendEscaped(_ text: String, _ escaping: Escaping) {
        var utf8Text = text
        let clean: Bool = utf8Text.withUTF8 { utf8 in
            guard !escaping.needsEscaping(utf8) else { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if !clean { appendString(escaping.escape(text)) }
    }

    package mutating func appendUnsigned(_ value: UInt64) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch
        withUnsafeMutableBytes(of: &digits) { scratch in
            var value = value
            var position = 24
            repeat {
                position -= 1
                scratch[position] = UInt8(truncatingIfNeeded: 48 + value % 10)
                value /= 10
            } while value != 0
            bytes.append(contentsOf: scratch[position...])
        }
    }

    package mutating func appendInteger(_ value: Int64) {
        if value < 0 {
            bytes.append(45)
            appendUnsigned(UInt64(bitPattern: 0 &- value))
        } else {
            appendUnsigned(UInt64(value))
        }
    }

    mutating func appendTimestamp(_ nanoseconds: Int64) {
        appendString(formatRFC3339(nanoseconds: nanoseconds))
    }

    package mutating func appendLiteral(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func appendString(_ text: String) {
        var text = text
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }
}

extension LogEntry {
    /// One line of text, safe for a terminal (control characters escaped):
    /// `2026-11-21T08:13:00.123456789Z info     net: request 42 took 1.5 ms`, then the metadata as
    /// ` key=value` pairs and an attached error as ` error=Type: description`.
    /// - Parameter includeSource: append `(file:line thread N)`.
    public func textLine(includeSource: Bool = false) -> String {
        var renderer = LineRenderer(capacity: 256)
        renderer.appendText(self, includeSource: includeSource)
        return String(decoding: renderer.bytes, as: UTF8.self)
    }

    /// One JSON object: `time` (RFC 3339 UTC, ns), `level`, `logger`, `message`, `args` (objects with
    /// `type` and `value`; redacted values have `"redacted":true` and a null value), `metadata` (an
    /// object, nested objects and arrays as logged; `{}` when none), `error` (`type`, `description`;
    /// only when one was attached), `source` (only when known), `file`, `line`, `function`,
    /// `thread`, `pid`.
    public func jsonLine() -> String {
        var renderer = LineRenderer(capacity: 512)
        renderer.appendJSON(self)
        return String(decoding: renderer.bytes, as: UTF8.self)
    }
}
