import CLogbook
@_spi(LogbookBackend) import Logbook
import Logging

/// A swift-log backend that records into a Logbook bundle: every library that logs through
/// swift-log lands in the crash-surviving ring.
///
/// ```swift
/// let bundle = try LogBundle(path: "/var/log/app.logbook")
/// LogbookLogHandler.bootstrap(bundle)
/// let logger = Logging.Logger(label: "net")
/// logger.info("request done", metadata: ["status": .stringConvertible(200), "path": "/health"])
/// ```
///
/// Each record keeps the label as its logger, the level, the rendered message, the metadata as
/// typed key/value pairs (handler metadata, then the metadata provider's, then the call's, later
/// ones winning), an attached error (type and description), and the call site (source, file,
/// function, line), which is stored once per site. A value marked `.private(_:)`
/// (`metadata: ["user": .private(name)]`) is stored as its type only. The bundle's runtime filter
/// (`LogFilter`, `LOGBOOK_FILTER`) applies to labels as to native logger names.
public struct LogbookLogHandler: LogHandler {
    /// The swift-log label, which is the Logbook logger name.
    public let label: String
    /// The label's logger in the bundle (shared by every handler of the label).
    public let logbookLogger: Logbook.Logger
    /// `logbookLogger.cLogger`, kept to read the filter level without touching the logger's bundle.
    /// Safe to share: the C logger lives as long as its bundle and its level is an atomic.
    nonisolated(unsafe) private let control: UnsafeMutablePointer<lb_logger>
    private var ownLevel: Logging.Logger.Level
    public var metadata: Logging.Logger.Metadata
    public var metadataProvider: Logging.Logger.MetadataProvider?

    /// - Parameters:
    ///   - label: the swift-log label, used as the Logbook logger name.
    ///   - bundle: the bundle that records this handler's calls.
    ///   - logLevel: this handler's own level: `.info` by default, as swift-log's own handlers, so
    ///     that a framework's trace and debug lines (Hummingbird's, Vapor's) are not recorded unless
    ///     asked for. `.trace` leaves the choice to the bundle's filter (`LOGBOOK_FILTER`).
    ///   - metadata: handler metadata, added to every call's.
    ///   - metadataProvider: swift-log's metadata provider, asked at every call.
    public init(
        label: String, bundle: LogBundle, logLevel: Logging.Logger.Level = .info,
        metadata: Logging.Logger.Metadata = [:], metadataProvider: Logging.Logger.MetadataProvider? = nil
    ) {
        self.label = label
        self.logbookLogger = (try? bundle.logger(label)) ?? Logbook.Logger.detached
        self.control = logbookLogger.cLogger
        self.ownLevel = logLevel
        self.metadata = metadata
        self.metadataProvider = metadataProvider
    }

    /// Makes Logbook the process's swift-log backend (`LoggingSystem.bootstrap`, once per process).
    public static func bootstrap(
        _ bundle: LogBundle, logLevel: Logging.Logger.Level = .info,
        metadataProvider: Logging.Logger.MetadataProvider? = nil
    ) {
        LoggingSystem.bootstrap(
            { label, provider in
                LogbookLogHandler(label: label, bundle: bundle, logLevel: logLevel, metadataProvider: provider)
            }, metadataProvider: metadataProvider)
    }

    /// The level below which calls are dropped before their message is built: this handler's own
    /// level or the bundle filter's level for the label, whichever is more severe (a label that is
    /// filtered off reads `.critical`, and its critical calls are dropped too). Setting it sets the
    /// handler's own level, for this value only.
    public var logLevel: Logging.Logger.Level {
        get {
            let filtered = lb_logger_min_level(control)
            return filtered <= ownLevel.logbookLevel ? ownLevel : Logging.Logger.Level(logbook: filtered)
        }
        set { ownLevel = newValue }
    }

    public subscript(metadataKey key: String) -> Logging.Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let rawLevel = event.level.logbookLevel
        guard lb_logger_enabled(control, rawLevel), let bundle = control.pointee.bundle else { return }
        // The source costs swift-log a search and a new String per call when the call gave none
        // (it is then the module of `file`): a site whose identity is its file, function and line
        // does not need it, except to register the site.
        let explicitSource = SwiftLogEventLayout.explicitSource(of: event)
        write(
            bundle: bundle, rawLevel: rawLevel, message: event.message, error: event.error, metadata: event.metadata,
            source: explicitSource, derivedSource: { event.source }, file: event.file, function: event.function,
            line: event.line)
    }

    /// swift-log's earlier entry point (before `log(event:)`), for callers that still use it.
    public func log(
        level: Logging.Logger.Level, message: Logging.Logger.Message, metadata: Logging.Logger.Metadata?,
        source: String, file: String, function: String, line: UInt
    ) {
        let rawLevel = level.logbookLevel
        guard lb_logger_enabled(control, rawLevel), let bundle = control.pointee.bundle else { return }
        write(
            bundle: bundle, rawLevel: rawLevel, message: message, error: nil, metadata: metadata, source: source,
            derivedSource: { source }, file: file, function: function, line: line)
    }

    /// - Parameters:
    ///   - source: the call's own source, or nil when it gave none (then it is `derivedSource()`,
    ///     the module of `file`, which is needed only to register the site).
    @inline(__always)
    private func write(
        bundle: OpaquePointer, rawLevel: UInt8, message: Logging.Logger.Message, error: (any Error)?,
        metadata explicit: Logging.Logger.Metadata?, source: String?, derivedSource: () -> String, file: String,
        function: String, line: UInt
    ) {
        let writer = lb_writer_get(bundle)!
        lb_record_begin(writer, control.pointee.id, rawLevel)
        message.description.writeLogArgument(to: writer)
        if !metadata.isEmpty || metadataProvider != nil || !(explicit?.isEmpty ?? true) {
            let merged = effectiveMetadata(explicit)
            if !merged.isEmpty { MetadataEncoder(writer: writer).putMetadata(merged) }
        }
        if let error { LoggedError.write(error, to: writer) }
        let line32 = UInt32(truncatingIfNeeded: line)
        let key = SiteIdentity.key(file: file, function: function, source: source, derivedSource: derivedSource)
        var site = lb_site_lookup(bundle, key.key_file, key.key_extra, line32, 0)
        if site == 0 {
            site = registerSite(
                bundle, keyFile: key.key_file, keyExtra: key.key_extra, line: line32, column: 0, file: file,
                function: function, template: "{}", source: source ?? derivedSource())
            if site == 0 { lb_record_discard(writer, UInt32(LB_DROP_META.rawValue)) }
        }
        lb_record_commit(writer, site)
    }

    /// Handler metadata, then the provider's, then the call's; later ones win (swift-log's order).
    private func effectiveMetadata(_ explicit: Logging.Logger.Metadata?) -> Logging.Logger.Metadata {
        let provided = metadataProvider?.get() ?? [:]
        let explicit = explicit ?? [:]
        if provided.isEmpty && explicit.isEmpty { return metadata }
        if metadata.isEmpty && provided.isEmpty { return explicit }
        var merged = metadata
        merged.merge(provided) { _, new in new }
        merged.merge(explicit) { _, new in new }
        return merged
    }

}

/// The identity of a swift-log call site in the bundle's site cache (`lb_site_lookup`): its file,
/// function and source, as text, and its line.
///
/// swift-log hands a backend `#fileID` and `#function` as `String`s, which are nearly always
/// literals: immortal strings whose bytes never move or change. Such a string is identified by its
/// 16 bytes alone (a small string holds its text in them; a large immortal one, the address and
/// length of its constant text: `StringBits`), so its identity is hashed from those bytes instead of its text,
/// which costs a fixed handful of multiplications instead of one per 8 bytes of text, and no
/// borrowing of the bytes. Any other string is hashed by its text (`lb_site_text_key_make`). The two
/// kinds of key are different 128-bit hashes: a site reached both ways is registered twice, with
/// the same text, which readers cannot tell apart.
enum SiteIdentity {
    /// A source of nil (the call gave none: swift-log derives it from `file`) is not part of a key
    /// of immortal strings, which `file` already determines; a text key hashes the derived one.
    @inline(__always)
    static func key(file: String, function: String, source: String?, derivedSource: () -> String) -> lb_site_text_key {
        if let file = StringBits.immortalWords(file), let function = StringBits.immortalWords(function) {
            if let source {
                if let bits = StringBits.immortalWords(source) { return bitsKey(file, function, bits, kind: 1) }
            } else {
                return bitsKey(file, function, (0, 0), kind: 0)
            }
        }
        return textKey(file: file, function: function, source: source ?? derivedSource())
    }

    private static func bitsKey(
        _ file: (UInt64, UInt64), _ function: (UInt64, UInt64), _ source: (UInt64, UInt64), kind: UInt64
    ) -> lb_site_text_key {
        var a: UInt64 = 0x5851_F42D_4C95_7F2D ^ kind
        var b: UInt64 = 0x1405_7B7E_F767_814F ^ kind
        for word in [file.0, file.1, function.0, function.1, source.0, source.1] {
            a = (a ^ word) &* 0x9E37_79B9_7F4A_7C15
            a ^= a >> 32
            b = (b ^ word) &* 0xC2B2_AE3D_27D4_EB4F
            b ^= b >> 29
        }
        return lb_site_text_key(key_file: UnsafeRawPointer(bitPattern: UInt(a | 1)), key_extra: UnsafeRawPointer(bitPattern: UInt(b | 1)))
    }

    private static func textKey(file: String, function: String, source: String) -> lb_site_text_key {
        // Borrow each string's bytes in place (literals and short strings are contiguous); copy
        // only a string that is not.
        withUTF8(file) { file in
            withUTF8(function) { function in
                withUTF8(source) { source in
                    lb_site_text_key_make(file.baseAddress, file.count, function.baseAddress, function.count,
                                          source.baseAddress, source.count)
                }
            }
        }
    }
}

/// Reads whether a `LogEvent` carries its call's own source without asking for `source`, which
/// derives one (a search and a new `String`) when it does not: `LogEvent` keeps it as an optional
/// stored just before `file`. The place is found from `file`'s offset and checked once on two
/// events, one with a source and one without; if the check fails (a later swift-log laid it out
/// differently), every call reads `source` as before.
enum SwiftLogEventLayout {
    static let sourceOffset: Int? = {
        guard let fileOffset = MemoryLayout<LogEvent>.offset(of: \LogEvent.file),
              fileOffset >= MemoryLayout<String?>.size, fileOffset % MemoryLayout<String?>.alignment == 0
        else { return nil }
        let offset = fileOffset - MemoryLayout<String?>.size
        func stored(_ event: LogEvent) -> String? {
            withUnsafeBytes(of: event) { $0.load(fromByteOffset: offset, as: String?.self) }
        }
        let given = "a source given by the call, longer than fifteen bytes"
        let with = LogEvent(level: .info, message: "m", metadata: nil, source: given, file: "f/x.swift", function: "g", line: 1)
        let without = LogEvent(level: .info, message: "m", metadata: nil, source: nil, file: "f/x.swift", function: "g", line: 1)
        guard stored(with) == given, stored(without) == nil, without.source == "f" else { return nil }
        return offset
    }()

    /// The call's own source, or nil when it gave none.
    @inline(__always)
    static func explicitSource(of event: LogEvent) -> String? {
        guard let offset = sourceOffset else { return event.source }
        return withUnsafeBytes(of: event) { $0.load(fromByteOffset: offset, as: String?.self) }
    }
}

@inline(__always)
private func withUTF8<R>(_ text: String, _ body: (UnsafeBufferPointer<CChar>) -> R) -> R {
    let direct = text.utf8.withContiguousStorageIfAvailable { bytes in
        bytes.withMemoryRebound(to: CChar.self) { body($0) }
    }
    if let direct { return direct }
    var copy = text
    return copy.withUTF8 { bytes in bytes.withMemoryRebound(to: CChar.self) { body($0) } }
}

/// Writes swift-log metadata as typed key/value arguments (logbook_format.h: METADATA, LIST, MAP).
struct MetadataEncoder {
    let writer: UnsafeMutablePointer<lb_writer>

    func putMetadata(_ metadata: Logging.Logger.Metadata) {
        lb_record_put_container(writer, UInt8(LB_ARG_METADATA.rawValue), UInt32(truncatingIfNeeded: metadata.count))
        for (key, value) in metadata {
            key.writeLogArgument(to: writer)
            put(value, depth: 2)
        }
    }

    /// `depth` counts open containers including this value's own; beyond the format's limit a
    /// container is stored as its description.
    func put(_ value: Logging.Logger.MetadataValue, depth: Int) {
        switch value {
        case .string(let text):
            text.writeLogArgument(to: writer)
        case .stringConvertible(let convertible):
            putTyped(convertible)
        case .array(let items) where depth <= Int(LB_ARG_MAX_DEPTH):
            lb_record_put_container(writer, UInt8(LB_ARG_LIST.rawValue), UInt32(truncatingIfNeeded: items.count))
            for item in items { put(item, depth: depth + 1) }
        case .dictionary(let pairs) where depth <= Int(LB_ARG_MAX_DEPTH):
            lb_record_put_container(writer, UInt8(LB_ARG_MAP.rawValue), UInt32(truncatingIfNeeded: pairs.count))
            for (key, item) in pairs {
                key.writeLogArgument(to: writer)
                put(item, depth: depth + 1)
            }
        case .array, .dictionary:
            value.description.writeLogArgument(to: writer)
        }
    }

    /// Numbers and booleans keep their type; a value marked `.private(_:)` only its type;
    /// anything else is stored as its description.
    func putTyped(_ value: any CustomStringConvertible & Sendable) {
        // The common types first: each case is a dynamic cast, paid by every value that misses it.
        switch value {
        case let v as Int: v.writeLogArgument(to: writer)
        case let v as String: v.writeLogArgument(to: writer)
        case let v as Double: v.writeLogArgument(to: writer)
        case let v as Bool: v.writeLogArgument(to: writer)
        case let v as PrivateMetadataValue: lb_record_put_redacted(writer, v.withheldType.rawValue)
        case let v as any LogArgument: v.writeLogArgument(to: writer)
        default: value.description.writeLogArgument(to: writer)
        }
    }
}

// MARK: Withheld metadata values

extension Logging.Logger.MetadataValue {
    /// A value that never reaches a log: every handler sees `<private>` as its description, and
    /// Logbook's records only its type, which the reader, `logbook show` and its JSON show as a
    /// message argument logged with `privacy: .private` (`<private>`; in JSON, null).
    ///
    /// ```swift
    /// logger.warning("login failed", metadata: ["user": .private(name), "attempt": .stringConvertible(3)])
    /// ```
    ///
    /// The value is not kept, so no handler can print it, whatever it does with the metadata.
    public static func `private`(_ value: some CustomStringConvertible & Sendable) -> Self {
        .stringConvertible(PrivateMetadataValue(withholding: value))
    }
}

/// A withheld swift-log metadata value (`.private(_:)`): its description is `<private>`, and
/// ``LogbookLogHandler`` records only its type. It keeps nothing of the value but that type.
public struct PrivateMetadataValue: CustomStringConvertible, CustomDebugStringConvertible, Sendable, Equatable {
    /// The type the value would have been stored as (`string` for anything but Logbook's argument
    /// types: other values are stored as their description).
    public let withheldType: LogArgumentType

    public init(withholding value: some CustomStringConvertible & Sendable) {
        withheldType = Self.storedType(of: value)
    }

    public var description: String { "<private>" }
    public var debugDescription: String { "<private>" }

    private static func storedType(of value: any CustomStringConvertible & Sendable) -> LogArgumentType {
        switch value {
        case let argument as any LogArgument: type(of: argument).logArgumentType
        case let metadata as Logging.Logger.MetadataValue:
            if case .stringConvertible(let inner) = metadata { storedType(of: inner) } else { .string }
        case let withheld as PrivateMetadataValue: withheld.withheldType
        default: .string
        }
    }
}

extension Logging.Logger.Level {
    /// Logbook's level (`lb_level`) of the same name.
    var logbookLevel: UInt8 {
        switch self {
        case .trace: 1
        case .debug: 2
        case .info: 3
        case .notice: 4
        case .warning: 5
        case .error: 6
        case .critical: 7
        }
    }

    init(logbook level: UInt8) {
        switch level {
        case ...1: self = .trace
        case 2: self = .debug
        case 3: self = .info
        case 4: self = .notice
        case 5: self = .warning
        case 6: self = .error
        default: self = .critical
        }
    }
}
