import CLogbook
import Synchronization

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
    public static var logger: Logger { CategoryLoggers.logger(for: Self.self) }

    /// The logger of this type's category (see ``LogCategory``).
    @inlinable
    public var logger: Logger { Self.logger }
}

extension LogBundle {
    /// The bundle of ``LogCategory`` loggers (and any code that wants one process-wide bundle), or
    /// `nil` before ``bootstrap(_:)``.
    public static var shared: LogBundle? { CategoryLoggers.state.withLock { $0.bundle } }

    /// Makes `bundle` the process-wide ``shared`` bundle. Category loggers switch to it at once;
    /// call it early, as a program's first lines.
    public static func bootstrap(_ bundle: LogBundle) {
        CategoryLoggers.state.withLock { state in
            state.bundle = bundle
            state.retired.append(contentsOf: state.entries.values)
            state.entries = [:]
            state.generation += 1
            CategoryLoggers.generation.store(state.generation, ordering: .releasing)
        }
    }
}

/// The per-type cache behind ``LogCategory/logger``: a direct-mapped table of immutable entries,
/// read with one atomic load; a miss (first use of a type, a colliding type or a new bootstrap)
/// takes the lock and registers the category in the shared bundle.
public enum CategoryLoggers {
    @usableFromInline
    final class Entry: Sendable {
        @usableFromInline let type: ObjectIdentifier
        @usableFromInline let generation: Int
        @usableFromInline let logger: Logger

        init(type: ObjectIdentifier, generation: Int, logger: Logger) {
            self.type = type
            self.generation = generation
            self.logger = logger
        }
    }

    @usableFromInline
    final class Slot: Sendable {
        @usableFromInline let entry = Atomic<UInt>(0)  // an Entry, retained for good, or 0
    }

    @usableFromInline static let slotCount = 256
    @usableFromInline static let slots: [Slot] = (0..<slotCount).map { _ in Slot() }
    @usableFromInline static let generation = Atomic<Int>(0)

    struct State {
        var bundle: LogBundle?
        var generation = 0
        /// The entries of this generation, by type: colliding types share a slot, not entries.
        var entries: [ObjectIdentifier: Entry] = [:]
        /// Entries of earlier generations: a reader may still hold one it loaded, so none is freed.
        var retired: [Entry] = []
    }
    static let state = Mutex(State())

    @inlinable
    public static func logger<T: LogCategory>(for type: T.Type) -> Logger {
        let id = ObjectIdentifier(type)
        let bits = UInt64(UInt(bitPattern: id)) &* 0x9E37_79B9_7F4A_7C15
        let slot = slots[Int(truncatingIfNeeded: bits >> 56) & (slotCount - 1)]
        let raw = slot.entry.load(ordering: .acquiring)
        if raw != 0 {
            let entry = Unmanaged<Entry>.fromOpaque(UnsafeRawPointer(bitPattern: raw)!).takeUnretainedValue()
            if entry.type == id && entry.generation == generation.load(ordering: .relaxed) {
                return entry.logger
            }
        }
        return resolve(type, slot: slot)
    }

    @usableFromInline @inline(never)
    static func resolve<T: LogCategory>(_ type: T.Type, slot: Slot) -> Logger {
        let category = T.logCategory
        return state.withLock { state in
            let id = ObjectIdentifier(type)
            var entry = state.entries[id]
            if entry == nil {
                guard let bundle = state.bundle, let logger = try? bundle.logger(category) else { return .detached }
                entry = Entry(type: id, generation: state.generation, logger: logger)
                state.entries[id] = entry
            }
            // The table holds no reference: `entries` and `retired` keep every entry alive.
            slot.entry.store(UInt(bitPattern: Unmanaged.passUnretained(entry!).toOpaque()), ordering: .releasing)
            return entry!.logger
        }
    }
}
