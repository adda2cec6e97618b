/// What `logbook stats` and `logbook report` show: counts, rates and times per group (call site,
/// logger or level), percentiles of every numeric argument position of a call site, records per
/// level over time buckets, and the errors with their first occurrence. Built by
/// ``LogStatistics/init(reading:options:)`` in one streaming pass; plain values, so that a report
/// or a test can also build one by hand.
public struct LogStatistics: Sendable, Equatable {
    /// What the records were grouped by.
    public enum Grouping: String, Sendable, CaseIterable {
        case site, logger, level
    }

    /// Levels, in order: index 0 is trace … index 6 is critical (`LogLevel.rawValue - 1`).
    public static let levelNames = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    public var grouping: Grouping
    /// Records counted (after filters).
    public var records: UInt64
    /// Wall time of the first and last record counted (nanoseconds since the Unix epoch, UTC).
    public var firstNanoseconds: Int64?
    public var lastNanoseconds: Int64?
    /// Records per level, indexed like ``levelNames`` (records of an unknown level are in
    /// ``otherLevels``).
    public var levelCounts: [UInt64]
    public var otherLevels: UInt64
    /// Width of a ``timeline`` bucket in nanoseconds (60 s unless the span asks for wider).
    public var bucketNanoseconds: Int64
    /// Consecutive buckets from the first record's bucket to the last one's (empty ones
    /// included).
    public var timeline: [TimeBucket]
    /// The groups, most records first.
    public var groups: [Group]
    /// Call sites that logged at error or critical, or attached an error, first occurrence first.
    public var errors: [ErrorSite]
    /// What the reader could not read or reported lost (one line each, as `logbook verify` says).
    public var issues: [String]

    public init(
        grouping: Grouping, records: UInt64, firstNanoseconds: Int64?, lastNanoseconds: Int64?,
        levelCounts: [UInt64], otherLevels: UInt64, bucketNanoseconds: Int64, timeline: [TimeBucket],
        groups: [Group], errors: [ErrorSite], issues: [String]
    ) {
        self.grouping = grouping
        self.records = records
        self.firstNanoseconds = firstNanoseconds
        self.lastNanoseconds = lastNanoseconds
        self.levelCounts = levelCounts
        self.otherLevels = otherLevels
        self.bucketNanoseconds = bucketNanoseconds
        self.timeline = timeline
        self.groups = groups
        self.errors = errors
        self.issues = issues
    }

    public struct TimeBucket: Sendable, Equatable {
        /// Start of the bucket (nanoseconds since the Unix epoch, a multiple of the width).
        public var startNanoseconds: Int64
        /// Records per level, indexed like ``LogStatistics/levelNames``.
        public var levelCounts: [UInt64]

        public init(startNanoseconds: Int64, levelCounts: [UInt64]) {
            self.startNanoseconds = startNanoseconds
            self.levelCounts = levelCounts
        }
    }

    /// One call site (with `--by site`), logger or level.
    public struct Group: Sendable, Equatable {
        /// The template for a site ("request {} took {} ms"), the logger's name, or the level's.
        public var name: String
        /// For a site: where it is (`file:line`) and its function; nil otherwise.
        public var location: String?
        public var function: String?
        /// For a site: the loggers that logged through it, and the most severe level seen.
        public var loggers: [String]
        public var level: String?
        public var count: UInt64
        public var firstNanoseconds: Int64
        public var lastNanoseconds: Int64
        /// Every numeric argument position of a site (empty for loggers and levels).
        public var arguments: [ArgumentStatistics]
        /// The numeric values of the metadata keys asked for (``Options/metadataKeys``), in the
        /// order asked, each with the same histogram as an argument (`type` "metadata", `label`
        /// the key, `position` its index among the keys); a key with no number is left out.
        public var metadata: [ArgumentStatistics] = []

        /// Records per second between the first and the last record of the whole statistics
        /// (`count` when they are the same instant).
        public func rate(over statistics: LogStatistics) -> Double {
            guard let first = statistics.firstNanoseconds, let last = statistics.lastNanoseconds, last > first
            else { return Double(count) }
            return Double(count) / ((Double(last) - Double(first)) / 1e9)  // no Int64 overflow
        }

        public init(
            name: String, location: String?, function: String?, loggers: [String], level: String?, count: UInt64,
            firstNanoseconds: Int64, lastNanoseconds: Int64, arguments: [ArgumentStatistics]
        ) {
            self.name = name
            self.location = location
            self.function = function
            self.loggers = loggers
            self.level = level
            self.count = count
            self.firstNanoseconds = firstNanoseconds
            self.lastNanoseconds = lastNanoseconds
            self.arguments = arguments
        }
    }

    /// The values one argument position of a call site took.
    public struct ArgumentStatistics: Sendable, Equatable {
        /// 0-based position among the site's arguments.
        public var position: Int
        /// The argument's stored type name ("int", "double", "uint32", …; the first seen).
        public var type: String
        /// What the template says just before the placeholder, to name the column
        /// ("took" for "request {} took {} ms"): up to 3 words, may be empty.
        public var label: String
        /// The values, in a histogram of bounded relative error.
        public var histogram: ValueHistogram

        public init(position: Int, type: String, label: String, histogram: ValueHistogram) {
            self.position = position
            self.type = type
            self.label = label
            self.histogram = histogram
        }
    }

    /// A call site that logged at error or critical level, or with an error attached.
    public struct ErrorSite: Sendable, Equatable {
        public var template: String
        public var location: String?
        public var level: String
        public var count: UInt64
        public var firstNanoseconds: Int64
        /// The last occurrence: is it still happening?
        public var lastNanoseconds: Int64
        /// The first occurrence, rendered as `logbook show` prints its message (error included).
        public var firstMessage: String
        public var logger: String

        public init(
            template: String, location: String?, level: String, count: UInt64, firstNanoseconds: Int64,
            lastNanoseconds: Int64? = nil, firstMessage: String, logger: String
        ) {
            self.template = template
            self.location = location
            self.level = level
            self.count = count
            self.firstNanoseconds = firstNanoseconds
            self.lastNanoseconds = lastNanoseconds ?? firstNanoseconds
            self.firstMessage = firstMessage
            self.logger = logger
        }
    }
}
