import Logbook

/// The parts of draft-ietf-httpbis-resumable-upload the uploader speaks (interop version 6, as
/// swift-nio-extras' NIOResumableUpload and Apple's URLSession do), and the rules that keep an
/// upload URL from going anywhere but where its request went.
///
/// A 104's `Location` is a server's bytes: it is checked byte by byte against RFC 3986 before
/// anything parses it (Foundation's `URLComponents` setters trap on a space, `%zz` and the like:
/// the fourth outside test crashed the uploader with one), resolved here by RFC 3986's rules, and
/// kept only on the origin of the request (scheme, host and port), since the caller's headers,
/// credentials among them, go to it with the next requests. Anything else is ignored, counted
/// (``Uploader/Statistics/ignoredUploadURLs``), and the upload goes on as a plain one.
enum ResumableUpload {
    static let versionField = "Upload-Draft-Interop-Version"
    static let version = "6"
    /// The longest upload URL kept (the spool's state keeps at most this many bytes of it).
    static let maximumLength = SpoolStateRecord.maximumURL

    /// What an interim answer offers.
    enum Location: Equatable {
        /// No upload URL (not interop version 6, or no `Location`).
        case none
        /// The upload URL, absolute, on the request's origin.
        case kept(String)
        /// An upload URL that is not kept, and why.
        case ignored(String)
    }

    /// The upload URL of a 104 answer's headers, resolved against the URL the request went to.
    static func location(in headers: [(name: String, value: String)], sentTo request: String) -> Location {
        guard headerValue(versionField, in: headers) == version, let location = headerValue("Location", in: headers) else {
            return .none
        }
        let quoted = "'\(escapingControlCharacters(String(location.prefix(200))))'"
        guard let reference = reference(location) else {
            return .ignored("the upload URL \(quoted) of a 104 answer is not a URI reference (RFC 3986)")
        }
        guard let resolved = resolve(reference, against: request), resolved.utf8.count <= maximumLength else {
            return .ignored("the upload URL \(quoted) of a 104 answer cannot be resolved against the request's URL")
        }
        // User information only from the request's own URL: a server's authority has none.
        let namesAnAuthority = authorityRange(Array(reference.utf8)[...]) != nil
        guard let origin = origin(of: resolved, allowingUserInfo: !namesAnAuthority),
              origin == Self.origin(of: request, allowingUserInfo: true) else {
            return .ignored("the upload URL \(quoted) of a 104 answer is not on the request's origin")
        }
        return .kept(resolved)
    }

    /// Whether an upload URL kept in the spool may be used by `request` now: only by the very
    /// request URL it was learned from, and only when it is a URI on that URL's origin (a state
    /// copied from another destination's spool, or edited, must never send the caller's headers
    /// or body elsewhere).
    static func mayResume(at url: String, learnedFrom learned: String?, by request: String) -> Bool {
        guard let learned, learned == request, reference(url) == url,
              let origin = origin(of: url, allowingUserInfo: true) else { return false }
        return origin == Self.origin(of: request, allowingUserInfo: true)
    }

    // MARK: RFC 3986

    /// The reference without its fragment (never sent), if every byte of `text` is one RFC 3986
    /// allows where it stands: unreserved and reserved characters, `%` with two hex digits, one
    /// `#`, and `[` `]` only in an authority (an IP literal). `nil` for anything else: a space,
    /// a control or non-ASCII byte, `"<>\^`{|}`, a bad or lone `%`, a second `#`.
    static func reference(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumLength else { return nil }
        let fragmentStart = bytes.firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
        guard fragmentStart > 0 else { return nil }  // only a fragment: no upload URL
        let authority = authorityRange(bytes[..<fragmentStart])
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, isHexDigit(bytes[index + 1]), isHexDigit(bytes[index + 2]) else { return nil }
                index += 3
                continue
            }
            let isBracket = byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]")
            guard isAllowed(byte) || (isBracket && authority?.contains(index) == true)
                    || (byte == UInt8(ascii: "#") && index == fragmentStart) else { return nil }
            index += 1
        }
        return String(decoding: bytes[..<fragmentStart], as: UTF8.self)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (48...57).contains(byte) || (65...70).contains(byte) || (97...102).contains(byte)
    }

    /// Unreserved, sub-delims, `:` `@` `/` `?` (RFC 3986's pchar, query and path characters).
    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "-._~!$&'()*+,;=:@/?".utf8.contains(byte)
        }
    }

    /// The length of a scheme at the start (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` before a
    /// `:`), or nil.
    private static func schemeLength(_ bytes: ArraySlice<UInt8>) -> Int? {
        func isLetter(_ byte: UInt8) -> Bool { (65...90).contains(byte) || (97...122).contains(byte) }
        guard let first = bytes.first, isLetter(first) else { return nil }
        for index in bytes.indices {
            let byte = bytes[index]
            if byte == UInt8(ascii: ":") { return index - bytes.startIndex }
            guard isLetter(byte) || (48...57).contains(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: ".") else { return nil }
        }
        return nil
    }

    /// Where the authority of a reference (`scheme://AUTHORITY` or `//AUTHORITY`) lies, if it has one.
    private static func authorityRange(_ bytes: ArraySlice<UInt8>) -> Range<Int>? {
        var start = bytes.startIndex
        if let length = schemeLength(bytes) { start += length + 1 }
        guard start + 1 < bytes.endIndex, bytes[start] == UInt8(ascii: "/"), bytes[start + 1] == UInt8(ascii: "/") else { return nil }
        start += 2
        let end = bytes[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? bytes.endIndex
        return start..<end
    }

    /// `reference` resolved against `base` (RFC 3986, 5.2; dot segments are left to the server's
    /// path rules: they never change the origin). `nil` when `base` is no http(s) URL.
    static func resolve(_ reference: String, against base: String) -> String? {
        let baseBytes = Array(base.utf8)
        guard let schemeEnd = schemeLength(baseBytes[...]), let authority = authorityRange(baseBytes[...]) else { return nil }
        let scheme = String(decoding: baseBytes[..<schemeEnd], as: UTF8.self)
        let prefix = String(decoding: baseBytes[..<authority.upperBound], as: UTF8.self)  // scheme://authority
        let rest = baseBytes[authority.upperBound...]
        let pathEnd = rest.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        let path = String(decoding: rest[..<pathEnd], as: UTF8.self)
        let bytes = Array(reference.utf8)
        if schemeLength(bytes[...]) != nil { return reference }
        if reference.hasPrefix("//") { return scheme + ":" + reference }
        if reference.hasPrefix("/") { return prefix + reference }
        if reference.hasPrefix("?") { return prefix + (path.isEmpty ? "/" : path) + reference }
        let directory = path.lastIndex(of: "/").map { String(path[...$0]) } ?? "/"
        return prefix + directory + reference
    }

    /// An http(s) URL's origin: its scheme and host lowercased, and its port (80 or 443 when it
    /// names none). User information is part of the caller's URL only: a server's upload URL with
    /// one is not kept.
    struct Origin: Equatable {
        var scheme: String
        var host: String
        var port: Int
    }

    static func origin(of url: String, allowingUserInfo: Bool) -> Origin? {
        let bytes = Array(url.utf8)
        guard let schemeEnd = schemeLength(bytes[...]), let authority = authorityRange(bytes[...]) else { return nil }
        let scheme = String(decoding: bytes[..<schemeEnd], as: UTF8.self).lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        var hostStart = authority.lowerBound
        if let at = bytes[authority].lastIndex(of: UInt8(ascii: "@")) {
            guard allowingUserInfo else { return nil }
            hostStart = at + 1
        }
        let hostPort = bytes[hostStart..<authority.upperBound]
        let hostEnd: Int
        if hostPort.first == UInt8(ascii: "[") {
            guard let close = hostPort.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            hostEnd = close + 1
        } else {
            hostEnd = hostPort.firstIndex(of: UInt8(ascii: ":")) ?? hostPort.endIndex
        }
        let host = String(decoding: bytes[hostStart..<hostEnd], as: UTF8.self).lowercased()
        guard !host.isEmpty, !host.contains("%") else { return nil }
        var port = scheme == "http" ? 80 : 443
        if hostEnd < authority.upperBound {
            guard bytes[hostEnd] == UInt8(ascii: ":") else { return nil }
            let digits = bytes[(hostEnd + 1)..<authority.upperBound]
            if !digits.isEmpty {
                guard digits.count <= 5, digits.allSatisfy({ (48...57).contains($0) }),
                      let value = Int(String(decoding: digits, as: UTF8.self)), value <= 65535 else { return nil }
                port = value
            }
        }
        return Origin(scheme: scheme, host: host, port: port)
    }
}
