import CLogbook

/// Severity of a log entry, from the most verbose to the most severe.
public enum LogLevel: UInt8, CaseIterable, Comparable, Sendable, CustomStringConvertible {
    case trace = 1     // LB_LEVEL_TRACE
    case debug = 2     // LB_LEVEL_DEBUG
    case info = 3      // LB_LEVEL_INFO
    case notice = 4    // LB_LEVEL_NOTICE
    case warning = 5   // LB_LEVEL_WARNING
    case error = 6     // LB_LEVEL_ERROR
    case critical = 7  // LB_LEVEL_CRITICAL

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
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

    /// Parses a level name as printed by `description` (case-insensitive; "warn" is accepted).
    public init?(name: String) {
        let lower = name.lowercased()
        if lower == "warn" { self = .warning; return }
        guard let level = LogLevel.allCases.first(where: { $0.description == lower }) else { return nil }
        self = level
    }
}
