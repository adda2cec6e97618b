import CLogbook
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Which loggers record which levels: rules `pattern=level`, e.g. `net=debug,db=off,*=info`.
///
/// - `name` matches the logger `name` and the loggers below it in the dot hierarchy
///   (`name.anything`): `MyApp=off` silences every ``LogCategory`` type of the module `MyApp`.
/// - `prefix*` matches every logger whose name starts with `prefix`.
/// - `*` (or a bare level, `info`) matches every logger.
///
/// Levels are `trace`, `debug`, `info`, `notice`, `warning` (`warn`), `error`, `critical` and
/// `off`. The most specific rule wins (the longest pattern; a name beats a prefix of the same
/// length). A logger no rule matches records everything. Apply a filter with
/// ``LogBundle/filter``; `LOGBOOK_FILTER` in the environment is applied when a bundle opens.
public struct LogFilter: Sendable, Equatable, CustomStringConvertible {
    public struct Rule: Sendable, Equatable {
        /// `name`, `prefix*` or `*`.
        public var pattern: String
        /// The least severe level recorded, or `nil` for `off`.
        public var level: LogLevel?

        public init(_ pattern: String, _ level: LogLevel?) {
            self.pattern = pattern
            self.level = level
        }
    }

    /// A malformed filter: what is wrong and where.
    public struct SyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The filter text.
        public var spec: String
        /// The byte offset of the rule (or level) at fault.
        public var offset: Int
        /// What is wrong, naming the rule, e.g. `unknown level 'verbose' (levels: trace, ...)`.
        public var message: String

        public var description: String { "invalid log filter \"\(spec)\" at byte \(offset): \(message)" }
    }

    public var rules: [Rule]

    public init(rules: [Rule] = []) { self.rules = rules }

    /// Parses `net=debug,db=off,*=info`. Empty items between commas are ignored.
    public init(parsing spec: String) throws(SyntaxError) {
        var count = 0
        var error = lb_filter_error()
        guard lb_filter_parse(spec, nil, 0, &count, &error) == 0 else {
            throw SyntaxError(spec: spec, offset: Int(error.offset), message: Self.message(of: &error))
        }
        var raw = [lb_filter_rule](repeating: lb_filter_rule(), count: count)
        _ = lb_filter_parse(spec, &raw, count, &count, &error)
        let bytes = Array(spec.utf8)
        rules = raw.map { rule in
            let start = Int(rule.pattern_offset)
            let pattern = rule.pattern_length == 0
                ? "*" : String(decoding: bytes[start..<start + Int(rule.pattern_length)], as: UTF8.self)
            return Rule(pattern, LogLevel(rawValue: rule.level))
        }
    }

    /// The filter in `LOGBOOK_FILTER`, or `nil` when the variable is not set.
    public static func fromEnvironment(_ name: String = "LOGBOOK_FILTER") throws(SyntaxError) -> LogFilter? {
        guard let value = getenv(name) else { return nil }
        return try LogFilter(parsing: String(cString: value))
    }

    /// The rules as a filter string, e.g. `net=debug,db=off,*=info`.
    public var description: String {
        rules.map { "\($0.pattern)=\($0.level?.description ?? "off")" }.joined(separator: ",")
    }

    static func message(of error: inout lb_filter_error) -> String {
        withUnsafeBytes(of: &error.message) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}

extension LogBundle {
    /// The bundle's filter rules. Setting replaces them all and applies them to every logger at
    /// once, from any thread; loggers created later follow them too.
    public var filter: LogFilter {
        get {
            var rules: [LogFilter.Rule] = []
            var index = 0
            var level: UInt8 = 0
            var buffer = [CChar](repeating: 0, count: 256)
            while true {
                var length = lb_bundle_filter_rule(raw, index, &buffer, buffer.count, &level)
                if length < 0 { break }
                if Int(length) >= buffer.count {  // a long name: read it again in full
                    buffer = [CChar](repeating: 0, count: Int(length) + 1)
                    length = lb_bundle_filter_rule(raw, index, &buffer, buffer.count, &level)
                    if length < 0 { break }
                }
                let pattern = String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                rules.append(LogFilter.Rule(pattern, LogLevel(rawValue: level)))
                index += 1
            }
            return LogFilter(rules: rules)
        }
        set {
            let rules = newValue.rules.filter { !$0.pattern.isEmpty }
            let patterns = rules.map { strdup($0.pattern) }
            defer { patterns.forEach { free($0) } }
            let levels = rules.map { $0.level?.rawValue ?? UInt8(LB_LEVEL_OFF.rawValue) }
            patterns.map { UnsafePointer($0) }.withUnsafeBufferPointer { patternBuffer in
                _ = lb_bundle_set_filter_rules(raw, patternBuffer.baseAddress, levels, rules.count)
            }
        }
    }

    /// Sets the rule for one pattern (`name`, `prefix*` or `*`), keeping the other rules.
    /// `nil` switches the matching loggers off.
    public func setLevel(_ level: LogLevel?, for pattern: String) {
        lb_bundle_set_filter_rule(raw, pattern, level?.rawValue ?? UInt8(LB_LEVEL_OFF.rawValue))
    }

    /// Removes the rule for one pattern; the loggers it matched follow the remaining rules.
    public func removeFilterRule(for pattern: String) {
        lb_bundle_set_filter_rule(raw, pattern, 0)
    }

    /// The complaint about a malformed `LOGBOOK_FILTER` when the bundle opened (it was ignored,
    /// and the same line went to stderr), or `nil`.
    public var environmentFilterWarning: String? {
        lb_bundle_filter_warning(raw).map { String(cString: $0) }
    }
}
