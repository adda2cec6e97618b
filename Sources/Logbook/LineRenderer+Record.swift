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
        renderer.appendLiteral(#"],"metadata":{}"#)
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
    private let secondPrefix = UnsafeMutablePointer<UInt8>.allocate(capacity: 22)  // writeRFC3339 with one digit

    init() { line = .allocate(capacity: capacity) }
    deinit {
        line.deallocate()
        lastDoubleText.deallocate()
        secondPrefix.deallocate()
        threadEnd.deallocate()
    }

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
            out.put(Self.jsonLevel(raw.pointee.level))
            out.put(logger.json)
            out.put(#","message":""#)
            guard message(raw, site.json, site.jsonEnds, site.placeholders, json: true, &out) else { return nil }
            out.put(#"","args":["#)
            offset = 0
            var first = true
            while lb_arg_next(raw.pointee.args, raw.pointee.args_length, &offset, &arg) == 1 {
                if !first { out.put(44) }
                first = false
                guard let type = LogArgumentType(rawValue: arg.type) else { return nil }
                out.put(type.jsonArgumentPrefix)
                guard value(arg, json: true, &out) else { return nil }
                out.put(125)
            }
            out.put(site.jsonTail)
            if raw.pointee.thread_id != lastThread || raw.pointee.pid != lastPID {
                // `N,"pid":M}`: the same for every record of a thread.
                var end = LineCursor(threadEnd)
                end.putInteger(Int64(raw.pointee.thread_id))
                end.put(#","pid":"#)
                end.putInteger(Int64(raw.pointee.pid))
                end.put(125)
                threadEndCount = end.pointer - threadEnd
                lastThread = raw.pointee.thread_id
                lastPID = raw.pointee.pid
            }
            out.put(threadEnd, threadEndCount)
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
            putDouble(number, &out)
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

    /// The end of the last JSON line: `N,"pid":M}` of its thread.
    private var lastThread = UInt32.max, lastPID = UInt32.max
    private let threadEnd = UnsafeMutablePointer<UInt8>.allocate(capacity: 64)
    private var threadEndCount = 0

    /// `","level":"info","logger":` and the like.
    private static func jsonLevel(_ level: UInt8) -> StaticString {
        switch level {
        case 1: #"","level":"trace","logger":"#
        case 2: #"","level":"debug","logger":"#
        case 3: #"","level":"info","logger":"#
        case 4: #"","level":"notice","logger":"#
        case 5: #"","level":"warning","logger":"#
        case 6: #"","level":"error","logger":"#
        default: #"","level":"critical","logger":"#
        }
    }

    /// The last double written and its text: a JSON line writes each one twice (in the message
    /// and in `args`), and shortest round-trip formatting is the dearest part of a line.
    private var lastDouble: UInt64 = 0x7FF8_DEAD_BEEF_0001  // a NaN payload Swift never makes
    private let lastDoubleText = UnsafeMutablePointer<UInt8>.allocate(capacity: 40)
    private var lastDoubleCount = 0

    private func putDouble(_ number: Double, _ out: inout LineCursor) {
        if number.bitPattern != lastDouble {
            var cached = LineCursor(lastDoubleText)
            if cached.putShortDecimal(number) {
                lastDoubleCount = cached.pointer - lastDoubleText
            } else {
                var text = number.description
                lastDoubleCount = text.withUTF8 { utf8 in
                    let count = min(utf8.count, 40)
                    lastDoubleText.update(from: utf8.baseAddress!, count: count)
                    return count
                }
            }
            lastDouble = number.bitPattern
        }
        out.put(lastDoubleText, lastDoubleCount)
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
            second = seconds
            // writeRFC3339 is fixed width (any Int64 is a year from 1677 to 2262).
            writeRFC3339(nanoseconds: nanoseconds, fractionDigits: 1,  // its first 20 bytes: the second
                         to: UnsafeMutableBufferPointer(start: secondPrefix, count: 22))
        }
        out.put(secondPrefix, 20)
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

    /// "00" "01" … "99": two digits per division.
    private static let digitPairs: StaticString =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

    mutating func putUnsigned(_ value: UInt64) {
        if value < 10 {
            put(UInt8(truncatingIfNeeded: 48 + value))
            return
        }
        // Written backwards into 20 bytes of scratch, then copied.
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let pairs = Self.digitPairs.utf8Start
        let count: Int = withUnsafeMutableBytes(of: &scratch) { buffer in
            var position = 24
            var value = value
            while value >= 100 {
                let pair = Int(value % 100) * 2
                value /= 100
                position -= 2
                buffer[position] = pairs[pair]
                buffer[position + 1] = pairs[pair + 1]
            }
            if value >= 10 {
                let pair = Int(value) * 2
                position -= 2
                buffer[position] = pairs[pair]
                buffer[position + 1] = pairs[pair + 1]
            } else {
                position -= 1
                buffer[position] = UInt8(truncatingIfNeeded: 48 + value)
            }
            pointer.update(from: buffer.baseAddress!.assumingMemoryBound(to: UInt8.self) + position, count: 24 - position)
            return 24 - position
        }
        pointer += count
    }

    /// `value` as `Double.description` writes it, when it is a decimal with at most 7 digits after
    /// the point between 1e-4 and 1e15 (most logged measurements: 12.25, 0.1, 1500.0): the
    /// integer m and the smallest k with m / 10^k == value (a correctly rounded division of exact
    /// numbers, so what parsing "m·10^-k" gives), written with k decimals ("12.0" for k = 0). Only
    /// when 10^-k is wider than two of value's ulps, so that no other k-decimal number rounds to
    /// it and k digits are the shortest that round-trip, which is what description prints.
    /// False otherwise: the caller uses description.
    mutating func putShortDecimal(_ value: Double) -> Bool {
        let magnitude = value.magnitude
        guard magnitude >= 1e-4, magnitude < 1e15 else { return false }
        let ulp2 = magnitude.ulp * 2
        var k = 0
        var scale = 1.0
        while k <= 7 {
            let scaled = magnitude * scale
            let m = scaled.rounded()
            if m / scale == magnitude {
                guard 1 / scale > ulp2, m < 9_007_199_254_740_992 else { return false }
                if value < 0 { put(45) }
                let integer = UInt64(m)
                if k == 0 {
                    putUnsigned(integer)
                    put(46)
                    put(48)
                    return true
                }
                var divisor: UInt64 = 1
                for _ in 0..<k { divisor *= 10 }
                putUnsigned(integer / divisor)
                put(46)
                var fraction = integer % divisor
                for position in stride(from: k - 1, through: 0, by: -1) {
                    pointer[position] = UInt8(truncatingIfNeeded: 48 + fraction % 10)
                    fraction /= 10
                }
                pointer += k
                return true
            }
            k += 1
            scale *= 10
        }
        return false
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

extension LogArgumentType {
    /// `{"type":"int","value":` of a JSON line's `args`.
    var jsonArgumentPrefix: StaticString {
        switch self {
        case .bool: #"{"type":"bool","value":"#
        case .int8: #"{"type":"int8","value":"#
        case .int16: #"{"type":"int16","value":"#
        case .int32: #"{"type":"int32","value":"#
        case .int64: #"{"type":"int64","value":"#
        case .int: #"{"type":"int","value":"#
        case .uint8: #"{"type":"uint8","value":"#
        case .uint16: #"{"type":"uint16","value":"#
        case .uint32: #"{"type":"uint32","value":"#
        case .uint64: #"{"type":"uint64","value":"#
        case .uint: #"{"type":"uint","value":"#
        case .float: #"{"type":"float","value":"#
        case .double: #"{"type":"double","value":"#
        case .string: #"{"type":"string","value":"#
        case .staticString: #"{"type":"static_string","value":"#
        case .bytes: #"{"type":"bytes","value":"#
        }
    }
}
