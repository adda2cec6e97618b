import CLogbook
import Logbook
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One item of a spool and what the retry engine needs of it across launches.
public struct SpooledItem: Sendable, Equatable {
    /// Stable across launches: the SHA-256 of the content, or the caller's.
    public var id: String
    /// The size of its content.
    public var byteCount: Int
    /// The file it was submitted from ("" for data): marked delivered after its 2xx.
    public var source: String
    /// Attempts made so far.
    public var attempts: Int
    public var firstSubmittedNanoseconds: Int64
    /// When it may be tried next (ns since the epoch).
    public var nextAttemptNanoseconds: Int64
    /// The last attempt's HTTP status; 0 before any, -1 for a transport error or a timeout.
    public var lastStatus: Int
    /// The last attempt's failure, in words ("" before any).
    public var lastReason: String
    /// Where the server keeps this item's upload while it is incomplete (a resumable upload's
    /// `Location`, from its 104 answer): the next attempt asks it for its offset and sends the rest.
    public var resumptionURL: String? = nil
    /// The highest offset the server reported for its resumable upload.
    public var resumedOffset: Int = 0
    /// Attempts that moved the upload forward by enough (the server's offset, asked by the next
    /// attempt, had grown by ``RetryPolicy/creditsProgress(from:to:of:)``'s measure): they do not
    /// count toward the policy's `maxAttempts`, so that a flaky link that moves the upload forward
    /// each time does not exhaust them (its `maxAttemptsInAll` still bounds them).
    public var progressedAttempts: Int = 0
    /// The request URL whose 104 answer named ``resumptionURL``: the upload URL is used only while
    /// the item's request still goes there (never by another destination's request, which would
    /// carry its credentials to this one's server).
    public var resumptionRequestURL: String? = nil
}

/// A spool directory: items put there durably before `submit` returns, each with a state file
/// replaced atomically after every attempt, so that a `kill -9` at any moment loses nothing and a
/// new `Spool` on the directory resumes every item. One process at a time (an OFD lock).
///
/// Layout (docs/FORMAT.md, "Spool"): `lock`; per item `ID.data` (a copy of the submitted file, or a
/// hard link of an archive file, so that the archiver's retention cannot delete it first) and
/// `ID.state`;
/// `quarantine/` for items whose state file is damaged or whose content is gone, not a regular
/// file or not what its key names, `given-up/` for items given up when the
/// uploader keeps them, `delivered/` for delivery marks where the file system has no user
/// extended attributes. Every file goes through logbook_files.h.
///
/// Not thread-safe: the uploader uses it under its lock.
public final class Spool {
    public let path: String
    private let directory: Int32
    private let lockDescriptor: Int32
    private let clock: () -> Int64

    /// Opens (or creates, 0700) the spool at `path`; throws when another process uses it.
    public init(path: String, clock: @escaping () -> Int64 = Spool.wallClock) throws(LogbookError) {
        let directory = lb_dir_open_private(path, "spool directory", 1)
        try check(directory, .spool, "lb_dir_open_private", path: path, detailed: true)
        let lock = lb_file_open_at(directory, "lock", O_RDWR | O_CREAT, path)
        if lock < 0 {
            close(directory)
            try check(lock, .spool, "lb_file_open_at", path: path, detailed: true)
        }
        let locked = lb_file_lock_exclusive(lock)
        if locked != 0 {
            close(lock)
            close(directory)
            throw LogbookError(subject: .spool, operation: "Spool.init", path: path, errno: -locked,
                               detail: locked == -EWOULDBLOCK ? "another process uses this spool (or another Uploader of this process)" : nil)
        }
        self.path = path
        self.directory = directory
        self.lockDescriptor = lock
        self.clock = clock
    }

    deinit {
        close(lockDescriptor)  // releases the OFD lock
        close(directory)
    }

    public static func wallClock() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// Whether `id` can name an item: 1 to 128 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
    public static func isValidIdentifier(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard (1...128).contains(bytes.count), bytes[0] != UInt8(ascii: ".") else { return false }
        return bytes.allSatisfy { byte in
            (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
    }

    /// The path of an item's content, for the request body.
    public func dataPath(_ id: String) -> String { path + "/" + id + ".data" }

    // MARK: submitting

    /// The file `file` opened for submission: a regular file (never a FIFO or a device, so that
    /// nothing blocks), with its size.
    struct Source: ~Copyable {
        let descriptor: Int32
        let byteCount: Int
        let path: String

        init(_ path: String) throws(LogbookError) {
            let fd = try systemCall(.file, "open", path: path) { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
            var status = stat()
            do throws(LogbookError) {
                try systemCall(.file, "fstat", path: path) { fstat(fd, &status) }
                guard status.st_mode & S_IFMT == S_IFREG else {
                    throw LogbookError(subject: .spool, operation: "Spool.submit", path: path, errno: EINVAL,
                                       detail: "only a regular file can be uploaded")
                }
            } catch {
                close(fd)
                throw error
            }
            descriptor = fd
            byteCount = Int(status.st_size)
            self.path = path
        }

        deinit { close(descriptor) }

        func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(LogbookError) -> Int {
            try systemCall(.file, "pread", path: path) { pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset)) }
        }

        func contentIdentifier() throws(LogbookError) -> String {
            var hasher = SHA256()
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var offset = 0
            while true {
                let n = try systemCall(.file, "pread", path: path) {
                    buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
                }
                if n == 0 { break }
                offset += n
                buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            }
            return SHA256.hex(hasher.finish())
        }
    }

    /// The default identifier of the file at `file`: the SHA-256 of its content, in hex.
    public static func contentIdentifier(ofFile file: String) throws(LogbookError) -> String {
        try Source(file).contentIdentifier()
    }

    /// The size of the file at `file`, for the quota before it is submitted.
    public static func byteCount(ofFile file: String) throws(LogbookError) -> Int {
        try Source(file).byteCount
    }

    /// Puts the file at `file` into the spool, fsynced, and records it: a copy, or with `linking`
    /// a hard link of the very file opened where the spool is on its file system (a copy
    /// otherwise). Link only files that are never changed in place (Logbook's complete archive
    /// files): a link shares the file's content, a copy does not. The same id again returns the item
    /// already there; a caller's id already spooled with other content throws `EEXIST`.
    @discardableResult
    public func submit(file: String, id given: String? = nil, linking: Bool = false) throws(LogbookError) -> SpooledItem {
        let source = try Source(file)
        let id: String
        if let given { id = given } else { id = try source.contentIdentifier() }
        try requireValid(id)
        if let existing = try existingItem(id, sameAs: { (offset, buffer) throws(LogbookError) in
            try source.read(into: buffer, at: offset)
        }, byteCount: source.byteCount) {
            return existing
        }
        // The content first, then the state: a state in the spool always had its content, so one
        // found without it lost it since, and is reported. A crash between leaves content without
        // a state, which the next open records as an item (sent, never lost).
        let data = id + ".data"
        unlinkat(directory, data, 0)  // content left without a state by such a crash: replaced
        // Link the inode opened above, not whatever the name points to by now.
        if linking && linkat(AT_FDCWD, "/proc/self/fd/\(source.descriptor)", directory, data, AT_SYMLINK_FOLLOW) == 0 {
            do throws(LogbookError) {
                try systemCall(.file, "fsync", path: file) { fsync(source.descriptor) }
                try systemCall(.spool, "fsync", path: path) { fsync(directory) }
            } catch {
                unlinkat(directory, data, 0)
                throw error
            }
        } else {
            try copy(source, to: data)
        }
        return try recordAfterContent(id, byteCount: source.byteCount, source: absolute(file))
    }

    /// Puts `bytes` into the spool as a new item (written and fsynced) and records it. The same id
    /// again returns the item already there; a caller's id already spooled with other content
    /// throws `EEXIST`.
    @discardableResult
    public func submit(data bytes: [UInt8], id given: String? = nil) throws(LogbookError) -> SpooledItem {
        let id = given ?? SHA256.hex(of: bytes)
        try requireValid(id)
        if let existing = try existingItem(id, sameAs: { (offset, buffer) throws(LogbookError) in
            let n = min(buffer.count, bytes.count - offset)
            bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
            return n
        }, byteCount: bytes.count) {
            return existing
        }
        let result = bytes.withUnsafeBytes { lb_file_replace_at(directory, id + ".data", $0.baseAddress, $0.count, path) }
        try check(result, .spool, "lb_file_replace_at", path: path, detailed: true)
        return try recordAfterContent(id, byteCount: bytes.count, source: "")
    }

    /// The item spooled as `id`, if its content is complete and equal to what `read` gives
    /// (`byteCount` bytes); `EEXIST` if it differs. A state whose content is gone is removed, and
    /// `nil` returned: this submission brings the content again.
    private func existingItem(_ id: String, sameAs read: (Int, UnsafeMutableRawBufferPointer) throws(LogbookError) -> Int,
                              byteCount: Int) throws(LogbookError) -> SpooledItem? {
        guard let existing = try readState(id) else { return nil }
        let fd = lb_file_open_at(directory, id + ".data", O_RDONLY, nil)
        if fd == -ENOENT {
            unlinkat(directory, id + ".state", 0)
            return nil
        }
        try check(fd, .spool, "lb_file_open_at", path: dataPath(id))
        defer { close(fd) }
        var same = existing.byteCount == byteCount
        if same {
            let ours = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
            let theirs = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
            defer { ours.deallocate(); theirs.deallocate() }
            var offset = 0
            while same && offset < byteCount {
                let n = try read(offset, theirs)
                guard n > 0, pread(fd, ours.baseAddress, n, off_t(offset)) == n else { same = false; break }
                same = memcmp(ours.baseAddress!, theirs.baseAddress!, n) == 0
                offset += n
            }
        }
        guard same else {
            throw LogbookError(subject: .spool, operation: "Spool.submit", path: path, errno: EEXIST,
                               detail: "item '\(id)' is already spooled with other content (wait for its outcome, or use another id)")
        }
        return existing
    }

    /// Opens an item's content for its upload: a regular file in the spool, never through a
    /// symlink. `-ELOOP`, `-EINVAL` (not a regular file) or `-ENOENT` mean it cannot be sent.
    public func openContent(_ id: String) -> Int32 {
        lb_file_open_at(directory, id + ".data", O_RDONLY, path)
    }

    /// Records a new item whose content is in place; when its state cannot be written, the content
    /// goes too (the submission throws: nothing was promised).
    private func recordAfterContent(_ id: String, byteCount: Int, source: String) throws(LogbookError) -> SpooledItem {
        do {
            return try record(id, byteCount: byteCount, source: source)
        } catch {
            unlinkat(directory, id + ".data", 0)
            throw error
        }
    }

    private func record(_ id: String, byteCount: Int, source: String) throws(LogbookError) -> SpooledItem {
        let now = clock()
        let item = SpooledItem(id: id, byteCount: byteCount, source: source, attempts: 0,
                               firstSubmittedNanoseconds: now, nextAttemptNanoseconds: now,
                               lastStatus: 0, lastReason: "")
        try update(item)
        return item
    }

    private func absolute(_ file: String) -> String {
        if file.hasPrefix("/") { return file }
        guard let directory = getcwd(nil, 0) else { return file }
        defer { free(directory) }
        return String(cString: directory) + "/" + file
    }

    private func requireValid(_ id: String) throws(LogbookError) {
        guard Self.isValidIdentifier(id) else {
            throw LogbookError(subject: .spool, operation: "Spool.submit", path: path, errno: EINVAL,
                               detail: "item identifier '\(escapingControlCharacters(id))' is not 1 to 128 of A-Z a-z 0-9 . _ - (not starting with a dot)")
        }
    }

    private func copy(_ source: borrowing Source, to name: String) throws(LogbookError) {
        let temporary = name + ".new"
        let target = lb_file_create_at(directory, temporary, path)
        try check(target, .spool, "lb_file_create_at", path: path, detailed: true)
        let temporaryPath = path + "/" + temporary
        do throws(LogbookError) {
            defer { close(target) }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var offset = 0
            while true {
                let n = try systemCall(.file, "pread", path: source.path) {
                    buffer.withUnsafeMutableBytes { pread(source.descriptor, $0.baseAddress, $0.count, off_t(offset)) }
                }
                if n == 0 { break }
                offset += n
                var done = 0
                while done < n {
                    let m = try systemCall(.spool, "write", path: temporaryPath) {
                        buffer.withUnsafeBytes { write(target, $0.baseAddress! + done, n - done) }
                    }
                    done += m
                }
            }
            try systemCall(.spool, "fsync", path: temporaryPath) { fsync(target) }
        } catch {
            unlinkat(directory, temporary, 0)
            throw error
        }
        do throws(LogbookError) {
            try systemCall(.spool, "renameat", path: path + "/" + name) { renameat(directory, temporary, directory, name) }
            try systemCall(.spool, "fsync", path: path) { fsync(directory) }
        } catch {
            unlinkat(directory, temporary, 0)
            throw error
        }
    }

    // MARK: state

    /// Records an item's state, atomically and durably (write, fsync, rename, fsync).
    public func update(_ item: SpooledItem) throws(LogbookError) {
        let bytes = SpoolStateRecord.encode(item)
        let result = bytes.withUnsafeBytes { lb_file_replace_at(directory, item.id + ".state", $0.baseAddress, $0.count, path) }
        try check(result, .spool, "lb_file_replace_at", path: path, detailed: true)
    }

    /// Removes an item: its state first, then its content (a crash between leaves content without
    /// a state, which the next `contents()` records as an item again: sent again, never lost, and
    /// never a state without content, which is reported as content lost).
    public func remove(_ id: String) throws(LogbookError) {
        for name in [id + ".state", id + ".data"] {
            try systemCall(.spool, "unlinkat", path: path + "/" + name, ignoring: ENOENT) { unlinkat(directory, name, 0) }
        }
        _ = fsync(directory)
    }

    /// Moves an item (state, then content, as `remove` does) into the subdirectory `name`
    /// (`given-up`, `quarantine`).
    public func moveAside(_ id: String, to name: String) throws(LogbookError) {
        let target = try subdirectory(name)
        defer { close(target) }
        for file in [id + ".state", id + ".data"] {
            try systemCall(.spool, "renameat", path: path + "/" + file, ignoring: ENOENT) { renameat(directory, file, target, file) }
        }
        _ = fsync(target)
        _ = fsync(directory)
    }

    /// Opens (creating it 0700) the spool's subdirectory `name` relative to the spool's descriptor,
    /// never through a symlink (`O_NOFOLLOW`: one planted as `quarantine` would move items out of
    /// the spool), and only as a private directory (`lb_dir_check_private`): a symlink, FIFO or file
    /// in its place is refused with `ELOOP` or `ENOTDIR`, a directory others may write `EPERM`.
    private func subdirectory(_ name: String) throws(LogbookError) -> Int32 {
        let subpath = path + "/" + name
        try systemCall(.spool, "mkdirat", path: subpath, ignoring: EEXIST) { mkdirat(directory, name, 0o700) }
        let target = try systemCall(.spool, "openat", path: subpath) {
            openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        }
        let checked = lb_dir_check_private(target, "spool directory", subpath)
        if checked < 0 {
            close(target)
            try check(checked, .spool, "lb_dir_check_private", path: subpath, detailed: true)
        }
        return target
    }

    private func readState(_ id: String) throws(LogbookError) -> SpooledItem? {
        let fd = lb_file_open_at(directory, id + ".state", O_RDONLY, nil)
        if fd == -ENOENT { return nil }
        try check(fd, .spool, "lb_file_open_at", path: path + "/" + id + ".state")
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: SpoolStateRecord.maximumSize + 1)
        let n = try systemCall(.spool, "pread", path: path + "/" + id + ".state") {
            bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        }
        return SpoolStateRecord.decode(Array(bytes[0..<n]), id: id, byteCount: dataByteCount(id))
    }

    private func dataByteCount(_ id: String) -> Int {
        var status = stat()
        return fstatat(directory, id + ".data", &status, AT_SYMLINK_NOFOLLOW) == 0 ? Int(status.st_size) : 0
    }

    // MARK: delivery marks

    /// The extended attribute that marks a file delivered to the destination "" (its value: the
    /// item id); another destination's is this name, a dot and ``destinationTag(_:)``.
    public static let deliveredAttribute = "user.logbook.delivered"

    /// 16 hex digits of the SHA-256 of a destination's words: its delivery marks' suffix.
    public static func destinationTag(_ destination: String) -> String {
        String(SHA256.hex(of: Array(destination.utf8)).prefix(16))
    }

    static func deliveredAttribute(to destination: String) -> String {
        destination.isEmpty ? deliveredAttribute : deliveredAttribute + "." + destinationTag(destination)
    }

    /// The name of a mark in `delivered/`: the id, then `~` and the destination's tag (`~` is in no id).
    static func deliveryMark(_ id: String, to destination: String) -> String {
        destination.isEmpty ? id : id + "~" + destinationTag(destination)
    }

    /// Marks the file an item was submitted from as delivered to `destination`, so that a relaunch
    /// does not submit it there again: an extended attribute on the file (the same inode as the
    /// spool's hard link, where it is one), or, where the file system has no user attributes, a
    /// mark `delivered/ID~TAG` in the spool. Another destination's marks do not count for this one.
    public func markDelivered(_ item: SpooledItem, to destination: String = "") {
        guard !item.source.isEmpty else { return }
        var marked = false
        let attribute = Self.deliveredAttribute(to: destination)
        // The spool's own link first: the same inode as the source when it was linked.
        for (dir, name) in [(directory, item.id + ".data"), (AT_FDCWD, item.source)] where !marked {
            let fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var status = stat()
            guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
            if dir == directory && status.st_nlink < 2 { continue }  // a copy: mark the source
            let value = Array(item.id.utf8)
            marked = lb_file_attribute_set(fd, attribute, value, value.count) == 0
        }
        if !marked, let marks = try? subdirectory("delivered") {
            let fd = openat(marks, Self.deliveryMark(item.id, to: destination), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 { close(fd) }
            _ = fsync(marks)
            close(marks)
        }
    }

    /// Whether the file at `file` (submitted as `id`) was delivered to `destination` before: its
    /// attribute for that destination names `id`, or the spool holds a mark for both.
    public func wasDelivered(file: String, id: String, to destination: String = "") -> Bool {
        let fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd >= 0 {
            defer { close(fd) }
            var value = [UInt8](repeating: 0, count: 256)
            let n = lb_file_attribute_get(fd, Self.deliveredAttribute(to: destination), &value, value.count)
            if n > 0 && Array(value[0..<n]) == Array(id.utf8) { return true }
        }
        return faccessat(directory, "delivered/" + Self.deliveryMark(id, to: destination), F_OK, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// Removes the delivery marks of `delivered/` whose id starts with `prefix` and is not in
    /// `keep` (the files they marked are gone), whatever their destination, so that the marks stay
    /// as few as the files.
    public func pruneDeliveryMarks(prefix: String, keep: Set<String>) {
        guard faccessat(directory, "delivered", F_OK, AT_SYMLINK_NOFOLLOW) == 0,
              let marks = try? subdirectory("delivered") else { return }
        defer { close(marks) }
        for name in Self.names(in: marks) where name.hasPrefix(prefix) {
            let id = String(name.split(separator: "~", maxSplits: 1).first ?? Substring(name))
            if !keep.contains(id) { unlinkat(marks, name, 0) }
        }
    }

    private static func names(in directory: Int32) -> [String] {
        var names: [String] = []
        let listing = dup(directory)
        guard listing >= 0, let stream = fdopendir(listing) else { return [] }
        rewinddir(stream)
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(stream)
        return names
    }

    // MARK: resuming

    /// What a new `Spool` finds: every pending item, oldest first, the items whose state was
    /// damaged (moved to `quarantine/`, with their content, and reported here once), and the items
    /// whose content is gone (their state moved to `quarantine/`, and reported here once).
    public struct Contents: Sendable, Equatable {
        public var items: [SpooledItem]
        public var quarantined: [String]
        /// Items whose state was found without its content (`ID.data` deleted by someone else):
        /// they cannot be sent.
        public var withoutContent: [SpooledItem] = []
    }

    /// Lists the spool and repairs what a crash left: content without a state (a submission or a
    /// removal cut short, or put there by hand) is recorded now; temporary files are removed; a
    /// damaged state, and anything but a regular file where content belongs, is quarantined. A
    /// state without its content (which no crash leaves: content goes in first and out last) lost
    /// it since: its state is quarantined and the item reported.
    public func contents() throws(LogbookError) -> Contents {
        /// Quarantines an item; when that fails (the quarantine directory is unusable), the item
        /// is left where it is, out of the queue, and still reported: one bad item never stops
        /// the spool.
        func quarantine(_ id: String, into result: inout Contents) {
            try? moveAside(id, to: "quarantine")
            result.quarantined.append(id)
        }
        let names = Self.names(in: directory)
        let all = Set(names)
        var ids = Set<String>()
        for name in names {
            if name.hasSuffix(".new") {
                unlinkat(directory, name, 0)
            } else if name.hasSuffix(".data") || name.hasSuffix(".state") {
                let id = String(name[..<name.lastIndex(of: ".")!])
                if Self.isValidIdentifier(id) { ids.insert(id) }
            }
        }
        var result = Contents(items: [], quarantined: [])
        for id in ids.sorted() {
            var status = stat()
            if all.contains(id + ".data"),
               fstatat(directory, id + ".data", &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_mode & S_IFMT != S_IFREG {
                // A symlink, FIFO or directory where content belongs: never sent, never trusted.
                quarantine(id, into: &result)
            } else if !all.contains(id + ".data") {
                if let item = try? readState(id) {
                    try? moveAside(id, to: "quarantine")
                    result.withoutContent.append(item)
                } else {
                    quarantine(id, into: &result)
                }
            } else if !all.contains(id + ".state") {
                result.items.append(try record(id, byteCount: dataByteCount(id), source: ""))
            } else if let item = try? readState(id) {
                result.items.append(item)
            } else {
                quarantine(id, into: &result)
            }
        }
        result.items.sort { ($0.firstSubmittedNanoseconds, $0.id) < ($1.firstSubmittedNanoseconds, $1.id) }
        return result
    }
}

/// The bytes of a state file (docs/FORMAT.md, "Spool"), little-endian:
///
/// ```
///  0  magic "LBSPOOL1"      8 bytes
///  8  version               u32 (3)
/// 12  attempts              u32
/// 16  first submission      i64 ns since the epoch
/// 24  next attempt          i64 ns
/// 32  last status           i32 (0 none, -1 transport error or timeout)
/// 36  reason length r       u16 (at most 1024)
/// 38  source length s       u16 (at most 4096)
/// 40  size submitted        u64                      (version 2 and later)
/// 48  resumption URL length u u16 (at most 4096)     (version 3 and later)
/// 50  its request URL length q u16 (at most 4096)    (version 4; 0 in version 3)
/// 52  progressed attempts   u32
/// 56  resumed offset        u64
/// 64  reason, source, the resumption URL, then the request URL it was learned from   UTF-8
/// 64+r+s+u+q  CRC-32C of every byte before it        u32
/// ```
///
/// Versions 1 (strings at 40, no size), 2 (strings at 48, no resumption) and 3 (no request URL:
/// its resumption URL is never used) are read; 4 is written.
enum SpoolStateRecord {
    static let magic = Array("LBSPOOL1".utf8)
    static let maximumReason = 1024
    static let maximumSource = 4096
    static let maximumURL = 4096
    static let maximumSize = 68 + maximumReason + maximumSource + 2 * maximumURL

    static func encode(_ item: SpooledItem) -> [UInt8] {
        var bytes = magic
        func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        var reason: [UInt8] = []  // at most maximumReason bytes of whole characters
        for scalar in item.lastReason.unicodeScalars {
            let encoded = Array(String(scalar).utf8)
            if reason.count + encoded.count > maximumReason { break }
            reason += encoded
        }
        let source = item.source.utf8.count <= maximumSource ? Array(item.source.utf8) : []
        let url = (item.resumptionURL?.utf8.count ?? 0) <= maximumURL ? Array((item.resumptionURL ?? "").utf8) : []
        let request = (item.resumptionRequestURL?.utf8.count ?? 0) <= maximumURL ? Array((item.resumptionRequestURL ?? "").utf8) : []
        put(UInt32(4))
        put(UInt32(clamping: item.attempts))
        put(item.firstSubmittedNanoseconds)
        put(item.nextAttemptNanoseconds)
        put(Int32(clamping: item.lastStatus))
        put(UInt16(reason.count))
        put(UInt16(source.count))
        put(UInt64(item.byteCount))  // version 2: the size submitted, checked before every attempt
        put(UInt16(url.count))       // version 3: where a resumable upload resumes
        put(UInt16(request.count))   // version 4: the request URL that learned it
        put(UInt32(clamping: item.progressedAttempts))
        put(UInt64(clamping: item.resumedOffset))
        bytes.append(contentsOf: reason)
        bytes.append(contentsOf: source)
        bytes.append(contentsOf: url)
        bytes.append(contentsOf: request)
        put(bytes.withUnsafeBytes { lb_crc32c(0, $0.baseAddress, $0.count) })
        return bytes
    }

    /// The item, or `nil` for anything but a whole, intact record of version 1 to 4. Version 1
    /// records carry no size: the content's size now (`byteCount`) stands in.
    static func decode(_ bytes: [UInt8], id: String, byteCount: Int) -> SpooledItem? {
        guard bytes.count >= 44, bytes.count <= maximumSize, Array(bytes[0..<8]) == magic else { return nil }
        func get<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T {
            var value = T.zero
            withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes[offset..<offset + MemoryLayout<T>.size]) }
            return T(littleEndian: value)
        }
        let version = get(8, UInt32.self)
        guard version == 1 || (version == 2 && bytes.count >= 52) || ((version == 3 || version == 4) && bytes.count >= 68) else {
            return nil
        }
        let strings = [1: 40, 2: 48, 3: 64, 4: 64][Int(version)]!
        let reasonLength = Int(get(36, UInt16.self)), sourceLength = Int(get(38, UInt16.self))
        let urlLength = version >= 3 ? Int(get(48, UInt16.self)) : 0
        let requestLength = version >= 4 ? Int(get(50, UInt16.self)) : 0
        let end = strings + reasonLength + sourceLength + urlLength + requestLength
        guard reasonLength <= maximumReason, sourceLength <= maximumSource, urlLength <= maximumURL, requestLength <= maximumURL,
              version != 3 || get(50, UInt16.self) == 0, bytes.count == end + 4 else { return nil }
        let stored = get(end, UInt32.self)
        let computed = bytes.withUnsafeBytes { lb_crc32c(0, $0.baseAddress, end) }
        guard stored == computed else { return nil }
        let recorded = version == 1 ? byteCount : Int(clamping: get(40, UInt64.self))
        let sourceEnd = strings + reasonLength + sourceLength, urlEnd = sourceEnd + urlLength
        return SpooledItem(
            id: id, byteCount: recorded,
            source: String(decoding: bytes[strings + reasonLength..<sourceEnd], as: UTF8.self),
            attempts: Int(get(12, UInt32.self)), firstSubmittedNanoseconds: get(16, Int64.self),
            nextAttemptNanoseconds: get(24, Int64.self), lastStatus: Int(get(32, Int32.self)),
            lastReason: String(decoding: bytes[strings..<strings + reasonLength], as: UTF8.self),
            resumptionURL: urlLength == 0 ? nil : String(decoding: bytes[sourceEnd..<urlEnd], as: UTF8.self),
            resumedOffset: version >= 3 ? Int(clamping: get(56, UInt64.self)) : 0,
            progressedAttempts: version >= 3 ? Int(get(52, UInt32.self)) : 0,
            resumptionRequestURL: requestLength == 0 ? nil : String(decoding: bytes[urlEnd..<end], as: UTF8.self))
    }
}
