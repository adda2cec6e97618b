import CLogbook

/// A type that logs under its own category: it declares the category once (or takes the default,
/// its module-qualified name) and logs through `logger` without naming it again.
///
/// ```swift
/// struct Connection: LogCategory {
///     static let logCategory = "net.connection"   // optional; default "MyApp.Connection"
///     func open() { logger.info("opening \(fd)") }
/// }
/// ```
///
/// The category is the logger's name in ``LogBundle/shared``, so filter rules silence a type
/// (`net.connection=off`), a family of them (`net=warning`) or a whole module (`MyApp=off`, as
/// default categories start with the module name), and `Connection.logger.minimumLevel = nil`
/// silences one from code. Before ``LogBundle/bootstrap(_:)`` the loggers record nothing.
public protocol LogCategory {
    /// The logger name; by default `String(reflecting: Self.self)`, e.g. `MyApp.Connection`.
    static var logCategory: String { get }
}

extension LogCategory {
    public static var logCategory: String { String(reflecting: Self.self) }

    /// The logger of this type's category in ``LogBundle/shared``: found through a lock-free
    /// per-type cache, so a call costs a few nanoseconds more than a stored logger.
    @inlinable
    public static var logger: Logger {
        // Lent, not copied: the entry lives for good, so no reference count changes per call.
        _read {
            unowned(unsafe) let entry = CategoryLoggers.entry(for: Self.self).takeUnretainedValue()
            yield entry.logger
        }
    }

    /// The logger of this type's category (see ``LogCategory``).
    @inlinable
    public var logger: Logger {
        _read {
            unowned(unsafe) let entry = CategoryLoggers.entry(for: Self.self).takeUnretainedValue()
            yield entry.logger
        }
    }
}

extension LogBundle {
    /// The bundle of ``LogCategory`` loggers (and any code that wants one process-wide bundle), or
    /// `nil` before ``bootstrap(_:)``.
    public static var shared: LogBundle? { CategoryLoggers.state.withLock { $0.bundle } }

    /// Makes `bundle` the process-wide ``shared`` bundle. Category loggers switch to it at once;
    /// call it early, as a program's first lines.
    public static func bootstrap(_ bundle: LogBundle) { CategoryLoggers.bootstrap(bundle) }
}

/// The per-type cache behind ``LogCategory/logger-swift.type.property``: a direct-mapped table (in the C core, so
/// that a lookup is one atomic load) of immutable entries that are never freed. A miss (first use
/// of a type, a colliding type or a new bootstrap) takes the lock and registers the category in
/// the shared bundle.
public enum CategoryLoggers {
    @usableFromInline
    final class Entry: Sendable {
        @usableFromInline let type: ObjectIdentifier
        @usableFromInline let generation: UInt64
        @usableFromInline let logger: Logger

        init(type: ObjectIdentifier, generation: UInt64, logger: Logger) {
            self.type = type
            self.generation = generation
            self.logger = logger
        }
    }

    struct State {
        var bundle: LogBundle?
        var generation: UInt64 = 1
        /// The entries of this generation, by type: colliding types share a slot, not entries.
        var entries: [ObjectIdentifier: Entry] = [:]
        /// Entries of earlier generations: a reader may still hold one it loaded, so none is freed.
        var retired: [Entry] = []
    }
    static let state = Locked(State())

    /// An entry for a logger of no bundle (before any bootstrap).
    static let detachedEntry = Entry(type: ObjectIdentifier(Never.self), generation: 0, logger: .detached)

    @inlinable
    static func slotIndex(_ id: ObjectIdentifier) -> UInt32 {
        UInt32(truncatingIfNeeded: (UInt64(UInt(bitPattern: id)) &* 0x9E37_79B9_7F4A_7C15) >> 56)
    }

    /// The logger of a category type.
    @inlinable
    public static func logger<T: LogCategory>(for type: T.Type) -> Logger {
        entry(for: type).takeUnretainedValue().logger
    }

    /// The cache entry of a category type, unretained (entries are never freed).
    @inlinable @inline(__always)
    static func entry<T: LogCategory>(for type: T.Type) -> Unmanaged<Entry> {
        let id = ObjectIdentifier(type)
        let index = slotIndex(id)
        if let raw = lb_type_cache_load(index) {
            let entry = Unmanaged<Entry>.fromOpaque(raw)
            let matches = entry._withUnsafeGuaranteedRef {
                $0.type == id && $0.generation == lb_type_cache_current_generation()
            }
            if matches { return entry }
        }
        return resolve(type, index: index)
    }

    @usableFromInline @inline(never)
    static func resolve<T: LogCategory>(_ type: T.Type, index: UInt32) -> Unmanaged<Entry> {
        let category = T.logCategory
        return state.withLock { state in
            let id = ObjectIdentifier(type)
            var entry = state.entries[id]
            if entry == nil {
                guard let bundle = state.bundle, let logger = try? bundle.logger(category) else {
                    return Unmanaged.passUnretained(detachedEntry)
                }
                entry = Entry(type: id, generation: state.generation, logger: logger)
                state.entries[id] = entry
            }
            // The table holds no reference: `entries` and `retired` keep every entry alive.
            let unmanaged = Unmanaged.passUnretained(entry!)
            lb_type_cache_store(index, unmanaged.toOpaque())
            return unmanaged
        }
    }

    static func bootstrap(_ bundle: LogBundle) {
        state.withLock { state in
            state.bundle = bundle
            state.retired.append(contentsOf: state.entries.values)
            state.entries = [:]
            state.generation += 1
            lb_type_cache_set_generation(state.generation)
        }
    }
}
