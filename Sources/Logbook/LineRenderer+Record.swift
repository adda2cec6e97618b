import CLogbook

/// Rendering of a borrowed ``LogRecord`` (``LogReader/stream(where:_:)``) straight from its
/// encoded arguments: the same bytes as rendering its ``LogRecord/entry``, without decoding it.
/// A line is written into a scratch buffer sized for it once, with what belongs to its call site
/// and logger (escaped literals, file, function) made once per site and logger, and then
/// appended to ``bytes`` in one copy. A record with metadata or an error attached, an unknown call
/// site or level, or text that needs escaping takes the ``LogEntry`` path.
extension LineRenderer {
    public mutating func append(_ record: LogRecord, as format: Format) {
        let raw = record.raw
        let json: Bool
        let includeSource: Bool
        switch format {
        case .text(let source): (json, includeSource) = (false, source)
        case .json: (json, includeSource) = (true, false)
        }
        let rendered: Bool = recordScratch._withUnsafeGuaranteedRef { scratch in
            guard raw.pointee.level >= 1, raw.pointee.level <= 7,
                let length = scratch.render(raw, record.reader, json: json, includeSource: includeSource)
            else { return false }
            bytes.append(contentsOf: UnsafeBufferPointer(start: scratch.line, count: length + 1))
            return true
        }
        if !rendered { append(record.entry, as: format) }
    }
}

/// Bytes made once per call site: its template's literals escaped for a text line and for a JSON
/// string, and the end of a JSON line up to the thread (source, file, line, function).
final class SiteStyle {
    let placeholders: Int
    let text: Bytes, textEnds: UnsafeMutableBufferPointer<Int>
    let json: Bytes, jsonEnds: UnsafeMutableBufferPointer<Int>
    /// `  (FILE:LINE thread ` for text lines with the source.
    let textSource: Bytes
    /// `,"source":…,"file":…,"line":N,"function":…,"thread":`
    let jsonTail: Bytes
    let byteCount: Int

    /// Bytes that live as long as the style: read through pointers, with no reference counting
    /// on the hot path.
    typealias Bytes = UnsafeMutableBufferPointer<UInt8>

    static func copy<T>(_ array: [T]) -> UnsafeMutableBufferPointer<T> {
        let buffer = UnsafeMutableBufferPointer<T>.allocate(capacity: max(array.count, 1))
        _ = buffer.initialize(from: array)
        return UnsafeMutableBufferPointer(rebasing: buffer[0..<array.count])
    }

    deinit {
        for bytes in [text, json, textSource, jsonTail] { bytes.deallocate() }
        textEnds.deallocate()
        jsonEnds.deallocate()
    }

    init?(_ site: LogEntry.Site) {
        guard let segments = site.segments else { return nil }
        placeholders = segments.literals.count - 1
        func flatten(_ escaping: Escaping) -> (Bytes, UnsafeMutableBufferPointer<Int>) {
            var bytes: [UInt8] = [], ends: [Int] = []
            for literal in segments.literals {
                bytes += Array(escaping.escapeIfNeeded(literal).utf8)
                ends.append(bytes.count)
            }
            return (Self.copy(bytes), Self.copy(ends))
        }
        (text, textEnds) = flatten(.terminal)
        (json, jsonEnds) = flatten(.json)
        var renderer = LineRenderer(capacity: 256)
        renderer.appendLiteral("  (")
        renderer.appendEscaped(site.file ?? "?", .terminal)
        renderer.bytes.append(58)
        renderer.appendInteger(Int64(site.line))
        renderer.appendLiteral(" thread ")
        textSource = Self.copy(renderer.bytes)
        renderer.removeAll()
        if let source = site.source {
            renderer.appendLiteral(#","source":"#)
            renderer.appendJSONString(source)
        }
        renderer.appendLiteral(#","file":"#)
        renderer.appendJSONString(site.file)
        renderer.appendLiteral(#","line":"#)
        renderer.appendInteger(Int64(site.line))
        renderer.appendLiteral(#","function":"#)
        renderer.appendJSONString(site.function)
        renderer.appendLiteral(#","thread":"#)
        jsonTail = Self.copy(renderer.bytes)
        byteCount = max(text.count, json.count) + max(textSource.count, jsonTail.count)
    }
}

/// A logger's name as a text line shows it (escaped, "?" when unknown) and as a JSON value.
final class LoggerStyle {
    let text: SiteStyle.Bytes
    let json: SiteStyle.Bytes

    init(_ name: String?) {
        var renderer = LineRenderer(capacity: 64)
        renderer.appendEscaped(name ?? "?", .terminal)
        text = SiteStyle.copy(renderer.bytes)
        renderer.removeAll()
        renderer.appendJSONString(name)
        json = SiteStyle.copy(renderer.bytes)
    }

    deinit {
        text.deallocate()
        json.deallocate()
    }
}

/// The scratch line and the per-site and per-logger bytes of ``LineRenderer/append(_:as:)-(LogRecord,_)``.
final class RecordScratch {
    private(set) var line: UnsafeMutablePointer<UInt8>
    private var capacity = 4096
    private var sites: [UInt64: SiteStyle?] = [:]
    private var loggers: [UInt64: LoggerStyle] = [:]
    private var lastSiteKey = UInt64.max, lastLoggerKey = UInt64.max
    /// The styles used last (owned by `sites` and `loggers`).
    private var lastSite: Unmanaged<SiteStyle>?, lastLogger: Unmanaged<LoggerStyle>?
    private var lastReader: ObjectIdentifier?
    /// The date and time of day of the last second written ("2026-11-24T08:00:00.").
    private var second = Int64.min
    private var secondPrefix = [UInt8](repeating: 0, count: 20)

    init() { line = .allocate(capacity: capacity) }
    deinit { line.deallocate() }

    private func forget(unless reader: LogReader) {
        // Site and logger numbers belong to a reader's bundle.
        guard lastReader != ObjectIdentifier(reader) else { return }
        lastReader = ObjectIdentifier(reader)
        sites = [:]
        loggers = [:]
        lastSiteKey = .max
        lastLoggerKey = .max
    }

    private func site(_ session: UInt32, _ id: UInt32, _ reader: LogReader) -> Unmanaged<SiteStyle>? {
        let key = UInt64(session) << 32 | UInt64(id)
        if key == lastSiteKey { return lastSite }
        let style: SiteStyle?
        if let known = sites[key] {
            style = known
        } else {
            style = reader.site(session, id).flatMap(SiteStyle.init)
            sites[key] = style
        }
        lastSiteKey = key
        lastSite = style.map { Unmanaged.passUnretained($0) }
        return lastSite
    }

    private func logger(_ session: UInt32, _ id: UInt16, _ reader: LogReader) -> Unmanaged<LoggerStyle> {
        let key = UInt64(session) << 32 | UInt64(id)
        if key == lastLoggerKey, let lastLogger { return lastLogger }
        let style = loggers[key] ?? LoggerStyle(reader.loggerName(session, id))
        loggers[key] = style
        lastLoggerKey = key
        lastLogger = Unmanaged.passUnretained(style)
        return lastLogger!
    }

    /// Writes the line of `raw` (without its "\n") into `line`; returns its length, or nil when
    /// the record needs the ``LogEntry`` path.
    func render(_ raw: UnsafePointer<lb_entry>, _ reader: LogReader, json: Bool, includeSource: Bool) -> Int? {
        forget(unless: reader)
        guard let site = site(raw.pointee.session, raw.pointee.site_id, reader) else { return nil }
        let logger = logger(raw.pointee.session, raw.pointee.logger_id, reader)
        return site._withUnsafeGuaranteedRef { site in
            logger._withUnsafeGuaranteedRef { logger in
                render(raw, site: site, logger: logger, json: json, includeSource: includeSource)
            }
        }
    }

    /// Level names padded to 8 columns, as text lines show them.
    private static func paddedLevel(_ level: UInt8) -> StaticString {
        switch level {
        case 1: "trace   "
        case 2: "debug   "
        case 3: "info    "
        case 4: "notice  "
        case 5: "warning "
        case 6: "error   "
        default: "critical"
        }
    }

    private func render(_ raw: UnsafePointer<lb_entry>, site: SiteStyle, logger: LoggerStyle, json: Bool,
                includeSource: Bool) -> Int? {
        // Room for the whole line: an argument takes at least 2 of its bytes and is written in at
        // most 80 bytes (JSON: its type, value and a copy in the message), a string in 2× its bytes
        // plus that.
        let bound = 160 + site.byteCount + logger.json.count + logger.text.count + 42 * Int(raw.pointee.args_length)
        var offset: UInt32 = 0
        var arg = lb_arg()
        if bound > capacity {
            line.deallocate()
            capacity = 1 << (Int.bitWidth - (bound - 1).leadingZeroBitCount)
            line = .allocate(capacity: capacity)
        }
        var out = LineCursor(line)
        let wall = raw.pointee.wall_ns
        if json {
            out.put(#"{"time":""#)
            timestamp(wall, &out)
            out.put(#"","level":""#)
            out.put(LogLevel(rawValue: raw.pointee.level)!.staticName)
            out.put(#"","logger":"#)
            out.put(logger.json)
            out.put(#","message":""#)
            guard message(raw, site.json, site.jsonEnds, site.placeholders, json: true, &out) else { return nil }
            out.put(#"","args":["#)
            offset = 0
            var first = true
            while lb_arg_next(raw.pointee.args, raw.pointee.args_length, &offset, &arg) == 1 {
                if !first { out.put(44) }
                first = false
                out.put(#"{"type":""#)
                out.put(LogArgumentType(rawValue: arg.type)!.staticName)
                out.put(#"","value":"#)
                guard value(arg, json: true, &out) else { return nil }
                out.put(125)
            }
            out.put(#"],"metadata":{}"#)
            out.put(site.jsonTail)
            out.putInteger(Int64(raw.pointee.thread_id))
            out.put(#","pid":"#)
            out.putInteger(Int64(raw.pointee.pid))
            out.put(125)
        } else {
            timestamp(wall, &out)
            out.put(32)
            out.put(Self.paddedLevel(raw.pointee.level))
            out.put(32)
            out.put(logger.text)
            out.put(58)
            out.put(32)
            guard message(raw, site.text, site.textEnds, site.placeholders, json: false, &out) else { return nil }
            if includeSource {
                out.put(site.textSource)
                out.putInteger(Int64(raw.pointee.thread_id))
                out.put(41)
            }
        }
        out.put(10)
        return out.pointer - line - 1
    }

    /// The message as ``LineRenderer`` fills a template: placeholders in order, arguments beyond
    /// them after a space, "{}" for placeholders without one.
    private func message(_ raw: UnsafePointer<lb_entry>, _ literals: SiteStyle.Bytes,
                         _ ends: UnsafeMutableBufferPointer<Int>, _ placeholders: Int, json: Bool,
                         _ out: inout LineCursor) -> Bool {
        func literal(_ index: Int) {
            let start = index == 0 ? 0 : ends[index - 1]
            out.put(literals.baseAddress! + start, ends[index] - start)
        }
        literal(0)
        var offset: UInt32 = 0
        var arg = lb_arg()
        var index = 0
        while lb_arg_next(raw.pointee.args, raw.pointee.args_length, &offset, &arg) == 1 {
            if index >= placeholders { out.put(32) }
            guard value(arg, json: json, inMessage: true, &out) else { return false }
            if index < placeholders { literal(index + 1) }
            index += 1
        }
        while index < placeholders {
            out.put(123)
            out.put(125)
            literal(index + 1)
            index += 1
        }
        return true
    }

    /// One argument: as message text, or as a JSON value. False for a string that needs escaping.
    private func value(_ arg: lb_arg, json: Bool, inMessage: Bool = false, _ out: inout LineCursor) -> Bool {
        switch Int32(arg.type) {
        case Int32(LB_ARG_BOOL.rawValue):
            out.put(arg.value.b ? "true" : "false")
        case Int32(LB_ARG_I8.rawValue)...Int32(LB_ARG_INT.rawValue):
            out.putInteger(arg.value.i)
        case Int32(LB_ARG_U8.rawValue)...Int32(LB_ARG_UINT.rawValue):
            out.putUnsigned(arg.value.u)
        case Int32(LB_ARG_F64.rawValue):
            let number = arg.value.f
            if json && !inMessage && !number.isFinite { out.put(34) }
            var text = number.description
            text.withUTF8 { out.put($0.baseAddress!, $0.count) }
            if json && !inMessage && !number.isFinite { out.put(34) }
        case Int32(LB_ARG_STRING.rawValue), Int32(LB_ARG_STATIC_STRING.rawValue):
            let count = Int(arg.length)
            guard let bytes = arg.bytes else {
                if json && !inMessage { out.put(#""""#) }
                return true
            }
            for index in 0..<count {
                let byte = bytes[index]
                guard byte &- 0x20 < 0x5F, !json || (byte != 0x22 && byte != 0x5C) else { return false }
            }
            if json && !inMessage { out.put(34) }
            out.put(bytes, count)
            if json && !inMessage { out.put(34) }
        default:
            return false  // bytes, float, redacted, metadata or an error: the LogEntry path
        }
        return true
    }

    /// RFC 3339 with nanoseconds, as ``formatRFC3339(nanoseconds:)`` writes it, with the date and
    /// time of day made once per second.
    private func timestamp(_ nanoseconds: Int64, _ out: inout LineCursor) {
        var seconds = nanoseconds / 1_000_000_000
        var fraction = nanoseconds % 1_000_000_000
        if fraction < 0 {
            fraction += 1_000_000_000
            seconds -= 1
        }
        if seconds != second {
            let text = formatRFC3339(nanoseconds: seconds * 1_000_000_000)
            guard text.utf8.count == 30 else {  // a year past 9999: as formatRFC3339 says it
                var full = formatRFC3339(nanoseconds: nanoseconds)
                full.withUTF8 { out.put($0.baseAddress!, $0.count) }
                return
            }
            second = seconds
            secondPrefix = Array(text.utf8.prefix(20))
        }
        out.put(secondPrefix)
        var value = UInt64(fraction)
        let end = out.pointer + 9
        for position in stride(from: 8, through: 0, by: -1) {
            out.pointer[position] = UInt8(truncatingIfNeeded: 48 + value % 10)
            value /= 10
        }
        out.pointer = end
        out.put(90)  // Z
    }
}

/// Writes forward into memory its owner sized for the whole line.
struct LineCursor {
    var pointer: UnsafeMutablePointer<UInt8>

    init(_ start: UnsafeMutablePointer<UInt8>) { pointer = start }

    @inline(__always) mutating func put(_ byte: UInt8) {
        pointer.pointee = byte
        pointer += 1
    }

    @inline(__always) mutating func put(_ bytes: UnsafePointer<UInt8>, _ count: Int) {
        pointer.update(from: bytes, count: count)
        pointer += count
    }

    @inline(__always) mutating func put(_ text: StaticString) {
        put(text.utf8Start, text.utf8CodeUnitCount)
    }

    @inline(__always) mutating func put(_ bytes: UnsafeMutableBufferPointer<UInt8>) {
        if let base = bytes.baseAddress { put(base, bytes.count) }
    }

    @inline(__always) mutating func put(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { put($0.baseAddress!, $0.count) }
    }

    mutating func putUnsigned(_ value: UInt64) {
        var digits = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        var value = value
        for position in stride(from: digits - 1, through: 0, by: -1) {
            pointer[position] = UInt8(truncatingIfNeeded: 48 + value % 10)
            value /= 10
        }
        pointer += digits
    }

    mutating func putInteger(_ value: Int64) {
        if value < 0 {
            put(45)
            putUnsigned(UInt64(bitPattern: 0 &- value))
        } else {
            putUnsigned(UInt64(value))
        }
    }
}

extension LogLevel {
    var staticName: StaticString {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .notice: "notice"
        case .warning: "warning"
        case .error: "error"
        case .critical: "critical"
        }
    }
}

extension LogArgumentType {
    var staticName: StaticString {
        switch self {
        case .bool: "bool"
        case .int8: "int8"
        case .int16: "int16"
        case .int32: "int32"
        case .int64: "int64"
        case .int: "int"
        case .uint8: "uint8"
        case .uint16: "uint16"
        case .uint32: "uint32"
        case .uint64: "uint64"
        case .uint: "uint"
        case .float: "float"
        case .double: "double"
        case .string: "string"
        case .staticString: "static_string"
        case .bytes: "bytes"
        }
    }
}
