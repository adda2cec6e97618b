import Foundation
import Logbook
import LogbookQuery
import LogbookTestKit
import XCTest

/// `logbook query` and ``LogQuery``: answers checked against the same questions answered from
/// `logbook show --json` (in Python), pushdown counted, hostile SQL refused.
final class LogQueryTests: XCTestCase {
    struct Failure: Error { let text: String }

    /// A bundle of mixed shapes: levels, loggers, typed arguments, metadata, errors, strings long
    /// enough to be stored as fragments, two sessions, a ring small enough to be overwritten.
    func mixedBundle(overwrite: Bool) throws -> (path: String, written: Int) {
        let path = makeTemporaryDirectory(self) + "/mixed.logbook"
        var written = 0
        for session in 0..<2 {
            let bundle = try LogBundle(path: path, capacity: 8 * 4096, chunkSize: 4096,
                                       wrapPolicy: overwrite ? .overwrite : .lossless,
                                       archive: overwrite ? nil : ArchiveOptions())
            let net = try bundle.logger("net"), db = try bundle.logger("db.pool")
            for i in 0..<1500 {
                written += 1
                switch i % 10 {
                case 0: net.warning("slow request \(i) took \(Double(i) * 0.5) ms", metadata: ["user": "u\(i % 7)", "duration_us": .init(i * 3)])
                case 1: db.error("query \(i) failed", metadata: ["table": "t\(i % 3)"], error: CancellationError())
                case 2: net.info("big \(String(repeating: "x", count: 1000 + i % 5000)) \(i)")
                case 3: db.debug("pool size \(i % 17) free \(UInt64(i) * 1_000_000_007) ok \(i % 2 == 0)")
                case 4: net.critical("crash \(i) in \("session \(session)")")
                case 5:
                    // A repeated key (the last one is the value) and a float that is a whole number.
                    net.notice("dup \(i)", metadata: LogMetadata([
                        .init(key: "dup", value: .init(i)), .init(key: "dup", value: .init(i + 1)),
                        .init(key: "ratio", value: .init(Double(i))),
                    ]))
                default: net.info("request \(i) took \(i % 250) ms", metadata: ["user": "u\(i % 11)", "nested": ["a": .init(i), "b": ["x", "y"]]])
                }
            }
            try bundle.close()
        }
        return (path, written)
    }

    func logbook() throws -> String { try XCTUnwrap(logbookExecutable(), "the logbook executable is built with the tests") }

    /// Every question answered by `logbook query --json` and by Python over `show --json` alike.
    func testAnswersAgreeWithShowJSON() throws {
        for overwrite in [false, true] {
            let (path, written) = try mixedBundle(overwrite: overwrite)
            let dir = (path as NSString).deletingLastPathComponent
            let show = try runProgram(try logbook(), ["show", "--json", path])
            XCTAssertEqual(show.status, 0, show.output)
            try show.output.write(toFile: dir + "/show.jsonl", atomically: false, encoding: .utf8)
            let lines = show.output.split(separator: "\n").filter { $0.hasPrefix("{\"time\"") }.count
            if !overwrite { XCTAssertEqual(lines, written, "lossless with the archiver: every record") }
            let script = dir + "/compare.py"
            try Self.comparison.write(toFile: script, atomically: false, encoding: .utf8)
            let result = try runProgram("/usr/bin/env", ["python3", script, try logbook(), path, dir + "/show.jsonl"])
            XCTAssertEqual(result.status, 0, "overwrite \(overwrite): \(result.output)")
            XCTAssertTrue(result.output.contains("questions agree"), result.output)
        }
    }

    /// Python: each SQL question and the same question computed from show --json.
    static let comparison = #"""
import json, subprocess, sys, collections, math
logbook, bundle, shown = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(shown) if l.startswith('{"time"')]
LEVELS = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
def q(sql):
    out = subprocess.run([logbook, "query", "--json", bundle, sql], capture_output=True, text=True)
    if out.returncode != 0: sys.exit("query failed: %s\n%s" % (sql, out.stderr))
    return [json.loads(l) for l in out.stdout.splitlines()]
def check(name, got, want):
    if got != want: sys.exit("%s: query %r, show %r" % (name, got, want))
n = 0
check("count", q("SELECT count(*) AS n FROM records")[0]["n"], len(rows)); n += 1
by_level = collections.Counter(r["level"] for r in rows)
check("by level", {r["level"]: r["n"] for r in q("SELECT level, count(*) AS n FROM records GROUP BY level")}, dict(by_level)); n += 1
check("severity", [r["s"] for r in q("SELECT severity AS s FROM records")], [LEVELS.index(r["level"]) + 1 for r in rows]); n += 1
for name in ["warning", "error", "info"]:
    want = sum(1 for r in rows if LEVELS.index(r["level"]) >= LEVELS.index(name))
    check(">= " + name, q("SELECT count(*) AS n FROM records WHERE level >= '%s'" % name)[0]["n"], want); n += 1
    want = sum(1 for r in rows if r["level"] == name)
    check("= " + name, q("SELECT count(*) AS n FROM records WHERE level = '%s'" % name.upper())[0]["n"], want); n += 1
check("level in", q("SELECT count(*) AS n FROM records WHERE level IN (level('error'), 7)")[0]["n"],
      sum(1 for r in rows if r["level"] in ("error", "critical"))); n += 1
# Names compare by severity wherever SQLite evaluates them, not only where pushed down.
for sql, want in [
        ("level != 'INFO'", lambda r: r["level"] != "info"),
        ("NOT (level < 'warning')", lambda r: LEVELS.index(r["level"]) >= 4),
        ("level IN ('error', 'Critical')", lambda r: r["level"] in ("error", "critical")),
        ("level >= 'warning' OR 0", lambda r: LEVELS.index(r["level"]) >= 4),
        ("level > 4.5", lambda r: LEVELS.index(r["level"]) + 1 > 4.5),
        ("NOT (level >= 5.0)", lambda r: LEVELS.index(r["level"]) + 1 < 5),
        ("level != 5.0 OR 0", lambda r: LEVELS.index(r["level"]) + 1 != 5),
        ("(level < 4.5) OR 0", lambda r: LEVELS.index(r["level"]) + 1 < 4.5),
        ("severity >= 5", lambda r: LEVELS.index(r["level"]) >= 4),
        ("logger = 'net' OR template = 'pool size {} free {} ok {}'", lambda r: r["logger"] == "net" or r["message"].startswith("pool size")),
        ("level >= 'warning' OR logger = 'net'", lambda r: LEVELS.index(r["level"]) >= 4 or r["logger"] == "net"),
        ("logger = 'NET' COLLATE NOCASE", lambda r: r["logger"] == "net")]:
    check(sql, q("SELECT count(*) AS n FROM records WHERE " + sql)[0]["n"], sum(1 for r in rows if want(r))); n += 1
check("filter", q("SELECT count(*) FILTER (WHERE level >= 'warning') AS n FROM records")[0]["n"],
      sum(1 for r in rows if LEVELS.index(r["level"]) >= 4)); n += 1
check("by logger", {r["logger"]: r["n"] for r in q("SELECT logger, count(*) AS n FROM records GROUP BY logger")},
      dict(collections.Counter(r["logger"] for r in rows))); n += 1
check("logger =", q("SELECT count(*) AS n FROM records WHERE logger = 'db.pool'")[0]["n"], sum(1 for r in rows if r["logger"] == "db.pool")); n += 1
# Messages, rendered as show renders them, in the same order.
check("messages", [r["message"] for r in q("SELECT message FROM records")], [r["message"] for r in rows]); n += 1
check("times", [r["time_text"] for r in q("SELECT time_text FROM records")], [r["time"] for r in rows]); n += 1
# Typed arguments: every value of every position, with its type.
got = [[r["arg%d" % i] for i in range(1, 5)] for r in q("SELECT arg1, arg2, arg3, arg4 FROM records")]
def value(a):
    v = a["value"]
    if a["type"] == "bool": return 1 if v else 0
    return v
want = [[value(a) for a in r["args"][:4]] + [None] * (4 - len(r["args"][:4])) for r in rows]
for g, w in zip(got, want):
    for x, y in zip(g, w):
        if isinstance(y, float) or isinstance(x, float):
            if y is None or x is None or abs(x - y) > 1e-9 * max(1, abs(y)): sys.exit("args: %r vs %r" % (g, w))
        elif x != y: sys.exit("args: %r vs %r" % (g, w))
check("arg rows", len(got), len(want)); n += 1
# Metadata as JSON, and json_extract on it.
check("metadata", [json.loads(r["metadata"]) for r in q("SELECT metadata FROM records")], [r["metadata"] for r in rows]); n += 1
check("json_extract", q("SELECT count(*) AS n FROM records WHERE json_extract(metadata, '$.user') = 'u3'")[0]["n"],
      sum(1 for r in rows if r["metadata"].get("user") == "u3")); n += 1
check("dup", [r["d"] for r in q("SELECT json_extract(metadata, '$.dup') AS d FROM records WHERE template = 'dup {}'")],
      [r["metadata"]["dup"] for r in rows if r["message"].startswith("dup ")]); n += 1
# json_extract on a column takes a fast path: it must say what SQLite's own says (`|| ''`: no column).
for path in ["$.user", "$.duration_us", "$.dup", "$.ratio", "$.table", "$.nested", "$.nested.a", "$.missing", "$", "$.nested.b[1]"]:
    check("json_extract " + path, q("SELECT count(*) AS n FROM records WHERE json_extract(metadata, '%s') IS NOT json_extract(metadata || '', '%s') OR typeof(json_extract(metadata, '%s')) != typeof(json_extract(metadata || '', '%s'))" % (path, path, path, path))[0]["n"], 0); n += 1
check("json_extract args", q("SELECT count(*) AS n FROM records WHERE json_extract(args, '$[0]') IS NOT json_extract(args || '', '$[0]')")[0]["n"], 0); n += 1
check("float type", {r["t"] for r in q("SELECT json_type(metadata, '$.ratio') AS t FROM records WHERE template = 'dup {}'")}, {"real"}); n += 1
check("nested", q("SELECT sum(json_extract(metadata, '$.nested.a')) AS s FROM records")[0]["s"],
      sum(r["metadata"]["nested"]["a"] for r in rows if "nested" in r["metadata"]) or None); n += 1
# Errors.
check("errors", [(r["error_type"], r["error_message"]) for r in q("SELECT error_type, error_message FROM records WHERE error_type IS NOT NULL")],
      [(r["error"]["type"], r["error"]["description"]) for r in rows if "error" in r]); n += 1
# Sites: template, file, line, function of every record; counts of the sites table.
check("sites", [(r["template"] is not None, r["file"], r["line"], r["function"]) for r in q("SELECT template, file, line, function FROM records")],
      [(True, r["file"], r["line"], r["function"]) for r in rows]); n += 1
check("group by site", sorted((r["file"], r["line"], r["function"], r["n"]) for r in q("SELECT file, line, function, count(*) AS n FROM records GROUP BY site")),
      sorted((k[0], k[1], k[2], v) for k, v in collections.Counter((r["file"], r["line"], r["function"]) for r in rows).items())); n += 1
check("sites by site", sorted((r["line"], r["n"]) for r in q("SELECT line, sum(count) AS n FROM sites GROUP BY site")),
      sorted(collections.Counter(r["line"] for r in rows).items())); n += 1
total = sum(r["n"] for r in q("SELECT sum(count) AS n FROM sites"))
check("sites count", total, len(rows)); n += 1
# Time ranges: integers and RFC 3339 text, pushed down.
times = sorted(q("SELECT time FROM records"), key=lambda r: r["time"])
if times:
    middle = times[len(times) // 2]["time"]
    low, high = times[len(times) // 4]["time"], times[3 * len(times) // 4]["time"]
    check("time or", q("SELECT count(*) AS n FROM records WHERE time < %d OR time > %d" % (low, high))[0]["n"],
          sum(1 for t in times if t["time"] < low or t["time"] > high)); n += 1
    check("time real", q("SELECT count(*) AS n FROM records WHERE time < %d.0" % middle)[0]["n"],
          q("SELECT count(*) AS n FROM records WHERE time + 0 < %d.0" % middle)[0]["n"]); n += 1
    check("time >=", q("SELECT count(*) AS n FROM records WHERE time >= %d" % middle)[0]["n"], sum(1 for t in times if t["time"] >= middle)); n += 1
    check("time <", q("SELECT count(*) AS n FROM records WHERE time < %d" % middle)[0]["n"], sum(1 for t in times if t["time"] < middle)); n += 1
    text = q("SELECT time_text FROM records WHERE time = %d LIMIT 1" % middle)[0]["time_text"]
    check("time text", q("SELECT count(*) AS n FROM records WHERE time >= '%s'" % text)[0]["n"], sum(1 for t in times if t["time"] >= middle)); n += 1
# A percentile of an argument per template agrees with the values within the histogram's accuracy.
for r in q("SELECT template, count(*) AS n, percentile(arg2, 50) AS p50, min(arg2) AS lo, max(arg2) AS hi FROM records WHERE template LIKE 'request % took % ms' GROUP BY template"):
    values = sorted(a["args"][1]["value"] for a in rows if a["message"].startswith("request "))
    exact = values[max(1, math.ceil(0.5 * len(values))) - 1]
    if abs(r["p50"] - exact) > exact * 0.0005 + 1e-9: sys.exit("p50 %r, exact %r" % (r["p50"], exact))
    n += 1
print("%d questions agree" % n)
"""#

    /// A condition on time, level, logger or site is decided before a record is decoded: the
    /// records decoded are exactly those that pass it.
    func testPushedDownConditionsDecodeOnlyWhatPasses() throws {
        let path = makeTemporaryDirectory(self) + "/p.logbook"
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 4096, wrapPolicy: .lossless, archive: ArchiveOptions())
        let a = try bundle.logger("a"), b = try bundle.logger("b")
        for i in 0..<5000 {
            if i % 50 == 0 { a.error("bad \(i)") } else if i % 3 == 0 { b.info("fine \(i)") } else { a.info("ok \(i)") }
        }
        try bundle.close()
        let errors = 100, bRecords = (0..<5000).filter { $0 % 50 != 0 && $0 % 3 == 0 }.count
        func decoded(_ sql: String, expect: Int64) throws -> UInt64 {
            let query = try LogQuery(sources: [path])
            XCTAssertEqual(try query.rows(sql).first?.values.first, .integer(expect), sql)
            return query.recordsDecoded
        }
        XCTAssertEqual(try decoded("SELECT count(*) FROM records WHERE level >= 'error'", expect: Int64(errors)), UInt64(errors))
        XCTAssertEqual(try decoded("SELECT count(*) FROM records WHERE logger = 'b'", expect: Int64(bRecords)), UInt64(bRecords))
        XCTAssertEqual(try decoded("SELECT count(*) FROM records WHERE template = 'bad {}'", expect: Int64(errors)), UInt64(errors))
        XCTAssertEqual(try decoded("SELECT count(*) FROM records WHERE level > 7", expect: 0), 0)
        // Not pushed down: every record is decoded, SQLite decides.
        XCTAssertEqual(try decoded("SELECT count(*) FROM records WHERE message LIKE 'bad %'", expect: Int64(errors)), 5000)
    }

    func testHostileSQLIsRefusedAndNothingIsWritten() throws {
        let path = try mixedBundle(overwrite: true).path
        let dir = (path as NSString).deletingLastPathComponent
        let query = try LogQuery(sources: [path])
        for sql in [
            "DELETE FROM records", "INSERT INTO records(time) VALUES (1)", "UPDATE records SET level = 1",
            "ATTACH DATABASE '\(dir)/x.db' AS x", "CREATE TABLE t(x)", "CREATE TEMP TABLE t AS SELECT * FROM records",
            "PRAGMA table_info(records)", "SELECT load_extension('/tmp/nothing')", "VACUUM INTO '\(dir)/y.db'",
            "SELECT 1; DELETE FROM records", "DROP TABLE records", "BEGIN",
        ] {
            XCTAssertThrowsError(try query.rows(sql), sql) { error in
                guard let error = error as? QueryError else { return XCTFail("\(sql): \(error)") }
                switch error {
                case .refused, .invalid: break
                case .engine: XCTFail("\(sql): \(error)")
                }
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/x.db"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/y.db"))
        XCTAssertThrowsError(try query.rows("ATTACH DATABASE '\(dir)/x.db' AS x")) { error in
            XCTAssertEqual("\(error)", "refused: ATTACH and DETACH (a query reads only its sources); a query only reads records")
        }
        // Still answers afterwards.
        XCTAssertEqual(try query.rows("SELECT count(*) > 0 FROM records").first?.values, [.integer(1)])
    }

    /// Statements the authorizer is never asked about, or that SQLite counts as read-only, are
    /// refused by what they are, naming it and why. (The outside test of issue 42 found REINDEX
    /// accepted after 111 other write, ATTACH and load attempts were refused.)
    func testREINDEXAnalyzeVacuumAndTransactionsAreRefusedNamingWhy() throws {
        let path = try mixedBundle(overwrite: true).path
        let query = try LogQuery(sources: [path])
        let refused: [(sql: String, says: String)] = [
            ("REINDEX", "REINDEX (it rebuilds indexes"), ("reindex records", "REINDEX"), ("REINDEX level", "REINDEX"),
            ("/* a comment */ REINDEX", "REINDEX"), ("-- a comment\nReIndex;", "REINDEX"),
            ("EXPLAIN REINDEX", "REINDEX"), ("EXPLAIN QUERY PLAN REINDEX", "REINDEX"),
            ("ANALYZE", "ANALYZE (it writes"), ("ANALYZE records", "ANALYZE"), ("ANALYZE main", "ANALYZE"),
            ("VACUUM", "VACUUM (it rewrites"), ("VACUUM main", "VACUUM"),
            ("BEGIN", "BEGIN (a query holds no transaction)"), ("BEGIN IMMEDIATE", "BEGIN"),
            ("BEGIN EXCLUSIVE TRANSACTION", "BEGIN"), ("COMMIT", "COMMIT"), ("END", "END"),
            ("ROLLBACK", "ROLLBACK"), ("SAVEPOINT a", "SAVEPOINT"), ("RELEASE a", "RELEASE"),
            ("ROLLBACK TO a", "ROLLBACK"), ("PRAGMA query_only = 0", "PRAGMA"),
            ("PRAGMA writable_schema = 1", "PRAGMA"), ("PRAGMA no_such_pragma = 1", "PRAGMA"),
            ("DETACH main", "ATTACH and DETACH"),
        ]
        for (sql, says) in refused {
            XCTAssertThrowsError(try query.rows(sql), sql) { error in
                guard case QueryError.refused(let what) = error else { return XCTFail("\(sql): \(error)") }
                XCTAssertTrue(what.contains(says), "\(sql): \(what)")
            }
        }
        // What reads still answers, whatever comes first.
        for sql in [
            "SELECT count(*) > 0 FROM records", "  /* c */ -- d\n select 1", "VALUES (1)",
            "WITH n AS (SELECT 1 AS x) SELECT x FROM n", "EXPLAIN QUERY PLAN SELECT * FROM records",
            "EXPLAIN SELECT 1",
        ] {
            XCTAssertNoThrow(try query.rows(sql), sql)
        }
        let cli = try runProgram(try logbook(), ["query", path, "REINDEX"])
        XCTAssertEqual(cli.status, 1, cli.output)
        XCTAssertTrue(cli.output.contains("refused: REINDEX (it rebuilds indexes: a write); a query only reads records"), cli.output)
    }

    func testBadSQLSaysWhereAndABadSourceSaysWhich() throws {
        let path = try mixedBundle(overwrite: true).path
        let query = try LogQuery(sources: [path])
        XCTAssertThrowsError(try query.rows("SELECT count(* FROM records")) { error in
            guard case QueryError.invalid(let message, let offset?) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("syntax error"), message)
            XCTAssertEqual(offset, 15)
        }
        XCTAssertThrowsError(try query.rows("SELECT nope FROM records")) { error in
            XCTAssertTrue("\(error)".contains("no such column: nope"), "\(error)")
        }
        XCTAssertThrowsError(try query.rows("SELECT count(*) FROM records WHERE level >= 'loud'")) { error in
            XCTAssertTrue("\(error)".contains("no level"), "\(error)")
        }
        XCTAssertThrowsError(try LogQuery(sources: [path + "-missing"])) { error in
            XCTAssertEqual((error as? LogbookError)?.errno, ENOENT, "\(error)")
        }
        let cli = try runProgram(try logbook(), ["query", path, "SELECT count(*)\nFROM records WHER level > 1"])
        XCTAssertEqual(cli.status, 1)
        XCTAssertTrue(cli.output.contains("at byte 34 of the SQL:\nlogbook:   FROM records WHER level > 1\nlogbook:                     ^"), cli.output)
    }

    /// A damaged bundle answers what it can and says what it could not read, as show does.
    func testADamagedBundleIsReportedNotSilentlySkipped() throws {
        let path = makeTemporaryDirectory(self) + "/d.logbook"
        let bundle = try LogBundle(path: path, capacity: 16 * 4096, chunkSize: 4096)
        let log = try bundle.logger("x")
        for i in 0..<600 { log.info("record \(i) with some words") }
        try bundle.close()
        let ring = try FileHandle(forUpdating: URL(fileURLWithPath: path + "/ring"))
        try ring.seek(toOffset: 4096 * 3 + 200)
        ring.write(Data(repeating: 0xA5, count: 300))
        try ring.close()
        let cli = try runProgram(try logbook(), ["query", path, "SELECT count(*) FROM records"])
        XCTAssertTrue(cli.output.contains("problems in"), cli.output)
        let shown = try runProgram(try logbook(), ["show", path]).output.split(separator: "\n").filter { $0.contains(" x: ") }.count
        let counted = try LogQuery(sources: [path]).rows("SELECT count(*) FROM records").first?.values.first
        XCTAssertEqual(counted, .integer(Int64(shown)))
    }

    /// An archive file deleted: the answer says what it lacks, as show says it (verify's count).
    func testAMissingArchiveFileIsReportedAsShowReportsIt() throws {
        let path = makeTemporaryDirectory(self) + "/m.logbook"
        let bundle = try LogBundle(path: path, capacity: 8 * 4096, chunkSize: 4096, wrapPolicy: .lossless,
                                   archive: ArchiveOptions(maxFileSize: 16 * 4096, maxFiles: nil, quota: nil))
        let log = try bundle.logger("x")
        for i in 0..<6000 { log.info("record \(i) of the archive") }
        try bundle.close()
        let files = try FileManager.default.contentsOfDirectory(atPath: path + "/archive").filter { $0.contains(".lba") }.sorted()
        XCTAssertGreaterThan(files.count, 2, "\(files)")
        try FileManager.default.removeItem(atPath: path + "/archive/" + files[1])
        let shown = try runProgram(try logbook(), ["show", path])
        let queried = try runProgram(try logbook(), ["query", path, "SELECT count(*) FROM records"])
        let shownCount = shown.output.split(separator: "\n").filter { $0.contains(" x: ") }.count
        XCTAssertTrue(queried.output.contains("\n\(shownCount)\n"), queried.output)
        XCTAssertLessThan(shownCount, 6000)
        let problem = { (text: String) in
            text.split(separator: "\n").first { $0.contains("problems in") }.map { $0.split(separator: "(").dropFirst().first?.split(separator: ")").first }
        }
        XCTAssertNotNil(problem(queried.output) ?? nil, queried.output)
        XCTAssertEqual(problem(queried.output), problem(shown.output), "the same records unreadable or missing")
    }

    /// A follower lapped by an overwriting writer says how many records it never saw.
    func testAFollowedQueryCountsWhatWasOverwritten() throws {
        let path = makeTemporaryDirectory(self) + "/o.logbook"
        let bundle = try LogBundle(path: path, capacity: 8 * 4096, chunkSize: 4096, wrapPolicy: .overwrite)
        let log = try bundle.logger("x")
        for i in 0..<100 { log.info("first \(i)") }
        try bundle.flush()
        let query = try LogQuery(sources: [path])
        query.follow = true
        var seen = 0
        try query.run("SELECT arg1 FROM records") { _ in seen += 1 }
        XCTAssertEqual(seen, 100)
        for i in 0..<20_000 { log.info("lapping \(i) with some words to fill the ring") }
        try bundle.close()
        try query.run("SELECT arg1 FROM records") { _ in seen += 1 }
        XCTAssertGreaterThan(query.recordsOverwritten, 0)
        XCTAssertEqual(UInt64(seen) + query.recordsOverwritten, 20_100, "every record read or counted overwritten")
        let refused = try runProgram(try logbook(), ["query", "--follow", "--interval", "inf", path, "SELECT 1 FROM records"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.output.contains("--interval takes seconds from 0.01 to 86400"), refused.output)
    }

    /// A followed bundle removed and made again at its path: said, and the new one read from its start.
    func testAFollowedQueryTurnsToABundleMadeAgain() throws {
        let path = makeTemporaryDirectory(self) + "/r.logbook"
        var bundle = try LogBundle(path: path, capacity: 16 * 4096, chunkSize: 4096)
        var log = try bundle.logger("x")
        for i in 0..<50 { log.info("old \(i)") }
        try bundle.close()
        let query = try LogQuery(sources: [path])
        query.follow = true
        var seen: [String] = []
        let sql = "SELECT message FROM records"
        try query.run(sql) { if case .text(let m) = $0.values[0] { seen.append(m) } }
        XCTAssertEqual(seen.count, 50)
        XCTAssertEqual(query.followedSourceChanges(), [])
        try FileManager.default.removeItem(atPath: path)
        XCTAssertEqual(query.followedSourceChanges(), [.removed(source: path)])
        XCTAssertEqual(query.followedSourceChanges(), [], "said once")
        bundle = try LogBundle(path: path, capacity: 16 * 4096, chunkSize: 4096)
        log = try bundle.logger("x")
        for i in 0..<30 { log.info("new \(i)") }
        try bundle.close()
        XCTAssertEqual(query.followedSourceChanges(), [.replaced(source: path)])
        seen = []
        try query.run(sql) { if case .text(let m) = $0.values[0] { seen.append(m) } }
        XCTAssertEqual(seen, (0..<30).map { "new \($0)" })
    }

    func testFollowReturnsEachNewRecordOnceAndRefusesAggregates() throws {
        let path = makeTemporaryDirectory(self) + "/f.logbook"
        let bundle = try LogBundle(path: path, capacity: 64 * 4096, chunkSize: 4096, wrapPolicy: .lossless, archive: ArchiveOptions())
        let log = try bundle.logger("x")
        for i in 0..<300 { log.info("first \(i)") }
        try bundle.flush()
        let query = try LogQuery(sources: [path])
        query.follow = true
        XCTAssertFalse(try query.isStreamable("SELECT count(*) FROM records"))
        XCTAssertFalse(try query.isStreamable("SELECT arg1 FROM records ORDER BY arg1"))
        XCTAssertTrue(try query.isStreamable("SELECT arg1 FROM records WHERE level >= 'info'"))
        for refused in ["SELECT arg1 FROM records UNION ALL SELECT 'x'", "SELECT site, count FROM sites",
                        "SELECT DISTINCT arg1 FROM records", "SELECT arg1 FROM records LIMIT 3", "SELECT 1"] {
            XCTAssertFalse(try query.isStreamable(refused), refused)
        }
        var seen: [Int64] = []
        try query.run("SELECT arg1 FROM records") { if case .integer(let v) = $0.values[0] { seen.append(v) } }
        for i in 300..<1000 { log.info("next \(i)") }
        try bundle.flush()
        try query.run("SELECT arg1 FROM records") { if case .integer(let v) = $0.values[0] { seen.append(v) } }
        try bundle.close()
        try query.run("SELECT arg1 FROM records") { if case .integer(let v) = $0.values[0] { seen.append(v) } }
        XCTAssertEqual(seen, Array(0..<1000))
        XCTAssertThrowsError(try query.rows("SELECT a.arg1 FROM records a JOIN records b ON a.arg1 = b.arg1"))
    }

    /// show --where takes a SQL condition; stats names swift-log-style sites by place and gives
    /// metadata percentiles; the CLI's --csv quotes what needs quoting.
    func testShowWhereStatsMetadataAndCSV() throws {
        let path = makeTemporaryDirectory(self) + "/s.logbook"
        let bundle = try LogBundle(path: path)
        let log = try bundle.logger("http")
        for i in 0..<200 {
            log.info("\("GET /items/\(i), \"quoted\"")", metadata: ["duration_us": .init(i * 10), "request_id": "r\(i)"])
        }
        try bundle.close()
        let shown = try runProgram(try logbook(), ["show", path, "--where", "json_extract(metadata, '$.duration_us') >= 1500 AND level = 'info'"])
        XCTAssertEqual(shown.status, 0, shown.output)
        XCTAssertEqual(shown.output.split(separator: "\n").count, 50, shown.output)
        let legacy = try runProgram(try logbook(), ["show", path, "--where", "request_id=r7"])
        XCTAssertEqual(legacy.output.split(separator: "\n").count, 1, legacy.output)
        // A column is no metadata key: SQL's error is said, never an empty answer.
        for column in ["logger=http", "level=info", "a = 100"] {
            let refused = try runProgram(try logbook(), ["show", path, "--where", column])
            XCTAssertEqual(refused.status, 1, column)
            XCTAssertTrue(refused.output.contains("is neither a SQL condition"), refused.output)
        }
        // A trailing comment, and rowid as query gives it.
        let rowid = try LogQuery(sources: [path]).rows("SELECT rowid FROM records WHERE arg1 LIKE '%/items/7,%'")
        guard case .integer(let id)? = rowid.first?.values.first else { return XCTFail("\(rowid)") }
        let byRowid = try runProgram(try logbook(), ["show", path, "--where", "rowid = \(id) -- the seventh"])
        XCTAssertEqual(byRowid.output.split(separator: "\n").count, 1, byRowid.output)
        XCTAssertThrowsError(try LogQuery(sources: [path]).rows("SELECT time_ns('2026-02-30T00:00:00Z')"))
        let stats = try runProgram(try logbook(), ["stats", path, "--metadata", "duration_us"])
        XCTAssertTrue(stats.output.contains("testShowWhereStatsMetadataAndCSV() at LogbookQueryTests/LogQueryTests.swift:"), stats.output)
        XCTAssertTrue(stats.output.contains("metadata duration_us (200 values): min 0  p50 990"), stats.output)
        let csv = try runProgram(try logbook(), ["query", "--csv", path, "SELECT message FROM records LIMIT 1"])
        XCTAssertEqual(csv.output, "message\n\"GET /items/0, \"\"quoted\"\"\"\n")
    }
}
