import Logbook

extension LogStatistics {
    /// What ``init(reading:options:)`` counts and how.
    public struct Options: Sendable {
        public var grouping: Grouping
        /// Which records count (decided by the C reader before a record is decoded).
        public var filter: LogReader.Filter
        /// The width of a timeline bucket: 60 s, doubled until the timeline has at most
        /// `maximumBuckets` buckets.
        public var maximumBuckets: Int

        /// Metadata keys whose numeric values get percentiles per group, as arguments do
        /// (`duration_us` of a swift-log record): each record's metadata is decoded when any is asked.
        public var metadataKeys: [String]

        public init(grouping: Grouping = .site, filter: LogReader.Filter = .init(), maximumBuckets: Int = 2_000,
                    metadataKeys: [String] = []) {
            self.grouping = grouping
            self.filter = filter
            self.maximumBuckets = max(1, maximumBuckets)
            self.metadataKeys = metadataKeys
        }
    }

    /// Reads what `reader` has not read yet in one streaming pass (`LogReader.stream(where:_:)`):
    /// memory grows with the call sites, loggers and minutes, not with the records. The reader's
    /// issues after the pass become ``issues``.
    public init(reading reader: LogReader, options: Options = Options()) throws {
        var tally = Tally(grouping: options.grouping, metadataKeys: options.metadataKeys)
        try reader.stream(where: options.filter) { record in tally.count(record) }
        self = tally.statistics(maximumBuckets: options.maximumBuckets)
        issues = reader.issues.filter { $0.kind != .torn || $0.records > 0 }.map(\.description)
    }
}

/// One streaming pass's counts. Records are grouped by the reader's site (or logger, or level)
/// numbers first, cheaply; groups of the same call site in different processes of the bundle are
/// merged at the end by what the site is (template, file, line, function), so that the same
/// records give the same statistics however they were stored.
private struct Tally {
    let grouping: LogStatistics.Grouping
    let metadataKeys: [String]
    var records: UInt64 = 0
    var first = Int64.max, last = Int64.min
    var levels = [UInt64](repeating: 0, count: 7)
    var otherLevels: UInt64 = 0
    /// Records per level per minute since the epoch.
    var minutes: [Int64: [UInt64]] = [:]
    var minute = Int64.min
    var minuteCounts = [UInt64](repeating: 0, count: 7)
    var groups: [UInt64: Int] = [:]
    var lastKey = UInt64.max, lastGroup = 0
    var partials: [Partial] = []
    var errors: [UInt64: ErrorPartial] = [:]

    struct Partial {
        var name: String
        var location: String?
        var function: String?
        var loggers: Set<String> = []
        var lastLoggerKey = UInt64.max
        var level: UInt8 = 0
        var count: UInt64 = 0
        var first = Int64.max, last = Int64.min
        var arguments: [Argument?] = []
        var metadata: [ValueHistogram?] = []
    }

    struct Argument {
        var type: LogArgumentType
        var histogram = ValueHistogram()
    }

    struct ErrorPartial {
        var error: LogStatistics.ErrorSite
        var level: UInt8
    }

    init(grouping: LogStatistics.Grouping, metadataKeys: [String]) {
        self.grouping = grouping
        self.metadataKeys = metadataKeys
    }

    mutating func count(_ record: LogRecord) {
        let wall = record.wallNanoseconds
        let level = record.rawLevel
        records += 1
        first = min(first, wall)
        last = max(last, wall)
        let known = level >= 1 && level <= 7
        if known { levels[Int(level) - 1] += 1 } else { otherLevels += 1 }
        // Minutes come mostly in order: one dictionary access per minute, not per record.
        let minuteOfRecord = wall >= 0 ? wall / 60_000_000_000 : (wall + 1) / 60_000_000_000 - 1
        if minuteOfRecord != minute {
            flushMinute()
            minute = minuteOfRecord
            minuteCounts = minutes[minute] ?? [UInt64](repeating: 0, count: 7)
        }
        if known { minuteCounts[Int(level) - 1] += 1 }

        let key: UInt64
        switch grouping {
        case .site: key = record.siteKey
        case .logger: key = record.loggerKey
        case .level: key = UInt64(level)
        }
        let index: Int
        if key == lastKey {
            index = lastGroup
        } else if let found = groups[key] {
            index = found
        } else {
            index = partials.count
            partials.append(makePartial(record))
            groups[key] = index
        }
        lastKey = key
        lastGroup = index
        partials[index].count += 1
        partials[index].first = min(partials[index].first, wall)
        partials[index].last = max(partials[index].last, wall)
        if known, level > partials[index].level { partials[index].level = level }
        if grouping != .logger, record.loggerKey != partials[index].lastLoggerKey {
            partials[index].lastLoggerKey = record.loggerKey
            partials[index].loggers.insert(record.logger ?? "?")
        }
        var hasTail = false
        if grouping == .site {
            hasTail = record.forEachNumber { position, type, value in
                partials[index].record(position, type, value)
            }
        }
        if !metadataKeys.isEmpty { countMetadata(record, index) }
        if level >= LogLevel.error.rawValue || ((grouping != .site || hasTail) && record.hasError) {
            noteError(record, level: level, wall: wall)
        }
    }

    /// The numbers among the asked metadata keys' values (integers, floats; a string that is a
    /// number, as swift-log hands over `"\(duration)"`).
    mutating func countMetadata(_ record: LogRecord, _ index: Int) {
        let metadata = record.entry.metadata
        for (position, key) in metadataKeys.enumerated() {
            guard case .value(let value)? = metadata[key] else { continue }
            let number: Double
            switch value {
            case .signed(let v, _): number = Double(v)
            case .unsigned(let v, _): number = Double(v)
            case .double(let v): number = v
            case .float(let v): number = Double(v)
            case .string(let text, _):
                guard let parsed = Double(text) else { continue }
                number = parsed
            default: continue
            }
            while partials[index].metadata.count <= position { partials[index].metadata.append(nil) }
            if partials[index].metadata[position] == nil { partials[index].metadata[position] = ValueHistogram() }
            if case .signed(let v, _) = value {
                partials[index].metadata[position]!.record(v)
            } else {
                partials[index].metadata[position]!.record(number)
            }
        }
    }

    mutating func flushMinute() {
        guard minute != Int64.min else { return }
        minutes[minute] = minuteCounts
    }

    func makePartial(_ record: LogRecord) -> Partial {
        switch grouping {
        case .site:
            let location = record.file.map { "\($0):\(record.line)" }
            return Partial(name: Self.siteName(record.template, function: record.function, location: location),
                           location: location, function: record.function)
        case .logger:
            return Partial(name: record.logger ?? "?")
        case .level:
            return Partial(name: record.level?.description ?? "level\(record.rawLevel)")
        }
    }

    /// A site's name: its template, or where it is when the template is no text of its own ("{}":
    /// swift-log hands over a message already made, so every swift-log site has that template).
    static func siteName(_ template: String?, function: String?, location: String?) -> String {
        guard let template else { return "<unknown call site>" }
        guard template.replacingOccurrences(of: "{}", with: "").allSatisfy(\.isWhitespace) else { return template }
        switch (function, location) {
        case let (function?, location?): return "\(function) at \(location)"
        case let (nil, location?): return location
        case let (function?, nil): return function
        default: return template
        }
    }

    mutating func noteError(_ record: LogRecord, level: UInt8, wall: Int64) {
        let key = record.siteKey
        if var known = errors[key] {
            known.error.count += 1
            known.error.firstNanoseconds = min(known.error.firstNanoseconds, wall)
            known.error.lastNanoseconds = max(known.error.lastNanoseconds, wall)
            if level > known.level {
                known.level = level
                known.error.level = record.level?.description ?? "level\(level)"
            }
            errors[key] = known
            return
        }
        let entry = record.entry
        var message = entry.message
        if let error = entry.error { message += " error=\(error.type): \(error.description)" }
        errors[key] = ErrorPartial(
            error: LogStatistics.ErrorSite(
                template: Self.siteName(entry.template, function: entry.function, location: entry.file.map { "\($0):\(entry.line)" }),
                location: entry.file.map { "\($0):\(entry.line)" },
                level: entry.levelName, count: 1, firstNanoseconds: wall, lastNanoseconds: wall, firstMessage: message,
                logger: entry.logger ?? "?"),
            level: level)
    }

    mutating func statistics(maximumBuckets: Int) -> LogStatistics {
        flushMinute()
        // Groups of the same call site (or logger, or level) from several processes: merged.
        var merged: [String: Int] = [:]
        var groups: [LogStatistics.Group] = []
        var arguments: [[Argument?]] = []
        var metadata: [[ValueHistogram?]] = []
        for partial in partials {
            let identity = [partial.name, partial.location ?? "", partial.function ?? ""].joined(separator: "\u{0}")
            if let at = merged[identity] {
                groups[at].count += partial.count
                groups[at].firstNanoseconds = min(groups[at].firstNanoseconds, partial.first)
                groups[at].lastNanoseconds = max(groups[at].lastNanoseconds, partial.last)
                groups[at].loggers = Array(Set(groups[at].loggers).union(partial.loggers)).sorted()
                if let level = partial.levelName, LogStatistics.levelNames.firstIndex(of: level) ?? -1
                    > LogStatistics.levelNames.firstIndex(of: groups[at].level ?? "") ?? -1
                {
                    groups[at].level = level
                }
                for (position, histogram) in partial.metadata.enumerated() {
                    guard let histogram else { continue }
                    while metadata[at].count <= position { metadata[at].append(nil) }
                    if metadata[at][position] == nil { metadata[at][position] = histogram } else { metadata[at][position]!.merge(histogram) }
                }
                for (position, argument) in partial.arguments.enumerated() {
                    guard let argument else { continue }
                    while arguments[at].count <= position { arguments[at].append(nil) }
                    if arguments[at][position] == nil {
                        arguments[at][position] = argument
                    } else {
                        arguments[at][position]!.histogram.merge(argument.histogram)
                    }
                }
                continue
            }
            merged[identity] = groups.count
            groups.append(LogStatistics.Group(
                name: partial.name, location: partial.location, function: partial.function,
                loggers: partial.loggers.sorted(), level: partial.levelName, count: partial.count,
                firstNanoseconds: partial.first, lastNanoseconds: partial.last, arguments: []))
            arguments.append(partial.arguments)
            metadata.append(partial.metadata)
        }
        for index in groups.indices {
            let labels = Self.labels(groups[index].name, grouping == .site)
            groups[index].arguments = arguments[index].enumerated().compactMap { position, argument in
                argument.map {
                    LogStatistics.ArgumentStatistics(
                        position: position, type: $0.type.name, label: position < labels.count ? labels[position] : "",
                        histogram: $0.histogram)
                }
            }
        }
        for index in groups.indices {
            groups[index].metadata = metadata[index].enumerated().compactMap { position, histogram in
                histogram.map {
                    LogStatistics.ArgumentStatistics(position: position, type: "metadata", label: metadataKeys[position], histogram: $0)
                }
            }
        }
        groups.sort { $0.count != $1.count ? $0.count > $1.count : $0.name < $1.name }

        var errorSites: [String: LogStatistics.ErrorSite] = [:]
        for partial in errors.values {
            let identity = partial.error.template + "\u{0}" + (partial.error.location ?? "")
            if var known = errorSites[identity] {
                known.count += partial.error.count
                known.lastNanoseconds = max(known.lastNanoseconds, partial.error.lastNanoseconds)
                if partial.error.firstNanoseconds < known.firstNanoseconds {
                    known.firstNanoseconds = partial.error.firstNanoseconds
                    known.firstMessage = partial.error.firstMessage
                    known.logger = partial.error.logger
                }
                if LogStatistics.levelNames.firstIndex(of: partial.error.level) ?? -1
                    > LogStatistics.levelNames.firstIndex(of: known.level) ?? -1
                {
                    known.level = partial.error.level
                }
                errorSites[identity] = known
            } else {
                errorSites[identity] = partial.error
            }
        }
        let errors = errorSites.values.sorted {
            $0.firstNanoseconds != $1.firstNanoseconds ? $0.firstNanoseconds < $1.firstNanoseconds : $0.template < $1.template
        }

        // The timeline: minutes, or wider buckets (60 s doubled) when the span asks for them.
        var width: Int64 = 60_000_000_000
        var timeline: [LogStatistics.TimeBucket] = []
        if records > 0 {
            let firstMinute = minutes.keys.min()!, lastMinute = minutes.keys.max()!
            var minutesPerBucket: Int64 = 1
            while (lastMinute / minutesPerBucket - firstMinute / minutesPerBucket) + 1 > Int64(maximumBuckets) {
                minutesPerBucket *= 2
            }
            width *= minutesPerBucket
            let start = Self.floorDivide(firstMinute, minutesPerBucket), end = Self.floorDivide(lastMinute, minutesPerBucket)
            timeline = (start...end).map {
                LogStatistics.TimeBucket(startNanoseconds: $0 * width, levelCounts: [UInt64](repeating: 0, count: 7))
            }
            for (minute, counts) in minutes {
                let at = Int(Self.floorDivide(minute, minutesPerBucket) - start)
                for level in 0..<7 { timeline[at].levelCounts[level] += counts[level] }
            }
        }
        return LogStatistics(
            grouping: grouping, records: records, firstNanoseconds: records > 0 ? first : nil,
            lastNanoseconds: records > 0 ? last : nil, levelCounts: levels, otherLevels: otherLevels,
            bucketNanoseconds: width, timeline: timeline, groups: groups, errors: errors, issues: [])
    }

    static func floorDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
        value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor)
    }

    /// What the template says just before each placeholder: up to 3 words ("took" for
    /// "request {} took {} ms"); for loggers and levels, nothing.
    static func labels(_ template: String, _ isSite: Bool) -> [String] {
        guard isSite else { return [] }
        var labels: [String] = []
        var literal = ""
        var characters = Array(template)
        characters.append(" ")
        var index = 0
        while index < characters.count - 1 {
            if characters[index] == "{", characters[index + 1] == "{" {
                literal.append("{")
                index += 2
            } else if characters[index] == "{", characters[index + 1] == "}" {
                let words = literal.split(whereSeparator: { $0 == " " || $0 == "\t" }).suffix(3)
                labels.append(words.joined(separator: " ").trimmingCharacters(in: "=:,;("))
                literal = ""
                index += 2
            } else {
                literal.append(characters[index])
                index += 1
            }
        }
        return labels
    }
}

extension Tally.Partial {
    var levelName: String? { level == 0 ? nil : LogLevel(rawValue: level)?.description }

    mutating func record(_ position: Int, _ type: LogArgumentType, _ value: LogRecord.Number) {
        if position >= arguments.count {
            arguments.append(contentsOf: repeatElement(nil, count: position + 1 - arguments.count))
        }
        if arguments[position] == nil { arguments[position] = Tally.Argument(type: type) }
        switch value {
        case .signed(let v): arguments[position]!.histogram.record(v)
        case .unsigned(let v): arguments[position]!.histogram.record(v)
        case .floatingPoint(let v): arguments[position]!.histogram.record(v)
        }
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var result = Substring(self)
        while let first = result.first, set.contains(first) { result.removeFirst() }
        while let last = result.last, set.contains(last) { result.removeLast() }
        return String(result)
    }
}
