import Foundation
import Logbook
import LogbookQuery
import LogbookTestKit
import XCTest

/// `level >= 'warning'` means severity wherever SQLite evaluates it: every question asked of
/// `level` either answers as the same question asked of `severity`, or is refused with an error
/// that names `severity` (SQLite drops the level collation on what max(), ifnull(), CASE and other
/// functions make of the column, and would compare names as text: 'critical' < 'error').
final class LevelSeverityTests: XCTestCase {
    /// Four loggers whose worst levels differ: a critical, b error, c warning, d notice.
    func levelsBundle() throws -> String {
        let path = ProcessInfo.processInfo.environment["KEEP_LEVELS_BUNDLE"] ?? (makeTemporaryDirectory(self) + "/levels.logbook")
        let bundle = try LogBundle(path: path, capacity: 1 << 20, chunkSize: 4096)
        let a = try bundle.logger("a"), b = try bundle.logger("b"), c = try bundle.logger("c"), d = try bundle.logger("d")
        for i in 0..<700 {
            switch i % 7 {
            case 0: a.trace("t \(i)"); b.trace("t \(i)"); c.trace("t \(i)")
            case 1: a.debug("d \(i)"); b.debug("d \(i)"); c.debug("d \(i)")
            case 2: a.info("i \(i)"); b.info("i \(i)"); d.info("i \(i)")
            case 3: a.notice("n \(i)"); c.notice("n \(i)"); d.notice("n \(i)")
            case 4: a.warning("w \(i)"); c.warning("w \(i)")
            case 5: a.error("e \(i)"); b.error("e \(i)")
            default: if i % 3 == 0 { a.critical("c \(i)") } else { a.info("i \(i)") }
            }
        }
        try bundle.close()
        return path
    }

    enum Expected { case right, refused }

    /// The level names by severity, for answers computed from `severity`.
    static let names = "WITH n(s, name) AS (VALUES (1, 'trace'), (2, 'debug'), (3, 'info'), (4, 'notice'), (5, 'warning'), (6, 'error'), (7, 'critical')) "

    /// Each question asked of `level`, the same asked of `severity`, and what `level` must do.
    static let questions: [(level: String, severity: String, expected: Expected)] = [
        // The finding's cases: an aggregate's or a function's result compared, ordered or reduced.
        ("SELECT logger, max(level) AS worst FROM records GROUP BY logger HAVING worst >= 'error' ORDER BY logger",
         "SELECT logger, max(severity) AS worst FROM records GROUP BY logger HAVING worst >= 6 ORDER BY logger", .refused),
        ("SELECT count(*) FROM records WHERE ifnull(level, '') >= 'warning'",
         "SELECT count(*) FROM records WHERE severity >= 5", .refused),
        ("SELECT count(*) FROM records WHERE coalesce(level, 'trace') >= 'warning'",
         "SELECT count(*) FROM records WHERE severity >= 5", .refused),
        ("SELECT count(*) FROM records WHERE CASE WHEN logger = 'a' THEN level ELSE level END >= 'warning'",
         "SELECT count(*) FROM records WHERE severity >= 5", .refused),
        ("SELECT sum(CASE WHEN time > 0 THEN level END > 'info') FROM records",
         "SELECT sum(severity > 3) FROM records", .refused),
        ("SELECT count(*) FROM (SELECT logger, max(level) AS worst FROM records GROUP BY logger) WHERE worst >= 'error'",
         "SELECT count(*) FROM (SELECT logger, max(severity) AS worst FROM records GROUP BY logger) WHERE worst >= 6", .refused),
        ("WITH w AS (SELECT logger, max(level) AS worst FROM records GROUP BY logger) SELECT logger FROM w WHERE worst < 'warning'",
         "WITH w AS (SELECT logger, max(severity) AS worst FROM records GROUP BY logger) SELECT logger FROM w WHERE worst < 5", .refused),
        ("SELECT count(*) FROM records WHERE (SELECT max(level) FROM records WHERE logger = 'b') >= 'error'",
         "SELECT count(*) FROM records WHERE (SELECT max(severity) FROM records WHERE logger = 'b') >= 6", .refused),
        ("SELECT logger FROM records GROUP BY logger ORDER BY max(level) DESC, logger",
         "SELECT logger FROM records GROUP BY logger ORDER BY max(severity) DESC, logger", .refused),
        ("SELECT max(ifnull(level, 'trace')) FROM records WHERE logger = 'c'",
         "SELECT level FROM records WHERE logger = 'c' ORDER BY severity DESC LIMIT 1", .refused),
        ("SELECT count(*) FROM records WHERE ifnull(level, '') IN ('ERROR', 'CRITICAL')",
         "SELECT count(*) FROM records WHERE severity >= 6", .refused),
        ("SELECT count(*) FROM records WHERE ifnull(level, '') = 'Error'",
         "SELECT count(*) FROM records WHERE severity = 6", .refused),
        ("SELECT count(*) FROM records WHERE coalesce(level, 0) = 6",
         "SELECT count(*) FROM records WHERE severity = 6", .refused),
        ("SELECT count(*) FROM records WHERE CASE WHEN 1 THEN level END = json_extract('{\"l\":\"ERROR\"}', '$.l')",
         "SELECT count(*) FROM records WHERE severity = 6", .refused),
        // Equality as text agrees with the collation when both sides are spelt as the column
        // spells levels: answered.
        ("SELECT count(*) FROM records WHERE ifnull(level, '') = 'error'",
         "SELECT count(*) FROM records WHERE severity = 6", .right),
        ("SELECT count(*) FROM records WHERE CASE WHEN 1 THEN level END IN ('error', 'critical', 'none')",
         "SELECT count(*) FROM records WHERE severity >= 6", .right),
        ("SELECT count(*) FROM records r JOIN (SELECT logger AS g, max(level) AS m FROM records GROUP BY logger) s ON s.g = r.logger AND coalesce(r.level, '') = s.m",
         "SELECT count(*) FROM records r JOIN (SELECT logger AS g, max(severity) AS m FROM records GROUP BY logger) s ON s.g = r.logger AND r.severity = s.m", .right),
        ("SELECT count(*) FROM records WHERE nullif(level, 'info') > 'notice'",
         "SELECT count(*) FROM records WHERE severity > 4", .refused),
        ("SELECT logger, w FROM (SELECT logger, first_value(level) OVER (PARTITION BY logger ORDER BY ifnull(level, '') DESC) AS w, row_number() OVER (PARTITION BY logger) AS k FROM records) WHERE k = 1 ORDER BY logger",
         names + "SELECT logger, name FROM (SELECT logger, max(severity) AS s FROM records GROUP BY logger) JOIN n USING (s) ORDER BY logger", .refused),
        ("SELECT logger, w FROM (SELECT logger, first_value(level) OVER (PARTITION BY logger ORDER BY severity DESC) AS w, row_number() OVER (PARTITION BY logger) AS k FROM records) WHERE k = 1 ORDER BY logger",
         names + "SELECT logger, name FROM (SELECT logger, max(severity) AS s FROM records GROUP BY logger) JOIN n USING (s) ORDER BY logger", .right),
        // Written with COLLATE level, or on the column itself, the same questions are answered.
        ("SELECT logger, max(level) AS worst FROM records GROUP BY logger HAVING worst >= 'error' COLLATE level ORDER BY logger",
         names + "SELECT logger, name FROM (SELECT logger, max(severity) AS s FROM records GROUP BY logger) JOIN n USING (s) WHERE s >= 6 ORDER BY logger", .right),
        ("SELECT logger FROM records GROUP BY logger HAVING max(level) >= 'error' ORDER BY logger",
         "SELECT logger FROM records GROUP BY logger HAVING max(severity) >= 6 ORDER BY logger", .refused),
        ("SELECT count(*) FROM records WHERE ifnull(level, '') COLLATE level >= 'warning'",
         "SELECT count(*) FROM records WHERE severity >= 5", .right),
        ("SELECT logger FROM records GROUP BY logger ORDER BY max(level) COLLATE level DESC, logger",
         "SELECT logger FROM records GROUP BY logger ORDER BY max(severity) DESC, logger", .right),
        ("SELECT count(*) FROM (SELECT level AS l FROM records) WHERE l >= 'warning'",
         "SELECT count(*) FROM records WHERE severity >= 5", .right),
        ("SELECT count(*) FROM records WHERE CAST(level AS TEXT) >= 'Warning'",
         "SELECT count(*) FROM records WHERE severity >= 5", .right),
        ("SELECT logger, max(level), min(level) FROM records GROUP BY logger ORDER BY logger",
         names + "SELECT logger, high.name, low.name FROM (SELECT logger, max(severity) AS h, min(severity) AS l FROM records GROUP BY logger) JOIN n AS high ON high.s = h JOIN n AS low ON low.s = l ORDER BY logger", .right),
        ("SELECT level, count(*) FROM records GROUP BY level ORDER BY level DESC",
         "SELECT level, count(*) FROM records GROUP BY severity ORDER BY severity DESC", .right),
        ("SELECT DISTINCT level FROM records ORDER BY level",
         "SELECT DISTINCT level FROM records ORDER BY severity", .right),
        ("SELECT sum(level >= 'error'), count(*) FILTER (WHERE level > 'info'), sum(iif(level < 'notice', 1, 0)) FROM records",
         "SELECT sum(severity >= 6), count(*) FILTER (WHERE severity > 3), sum(iif(severity < 4, 1, 0)) FROM records", .right),
        ("SELECT sum(CASE level WHEN 'ERROR' THEN 1 WHEN 'Critical' THEN 10 END) FROM records",
         "SELECT sum(CASE severity WHEN 6 THEN 1 WHEN 7 THEN 10 END) FROM records", .right),
        ("SELECT count(*) FROM records WHERE level IN (SELECT max(level) FROM records GROUP BY logger)",
         "SELECT count(*) FROM records WHERE severity IN (SELECT max(severity) FROM records GROUP BY logger)", .right),
        ("SELECT logger, worst FROM (SELECT logger, max(level) OVER (PARTITION BY logger) AS worst, row_number() OVER (PARTITION BY logger) AS k FROM records) WHERE k = 1 ORDER BY logger",
         names + "SELECT logger, name FROM (SELECT logger, max(severity) AS s FROM records GROUP BY logger) JOIN n USING (s) ORDER BY logger", .right),
        ("SELECT count(*) FROM records WHERE level >= 'warning' OR logger = 'd'",
         "SELECT count(*) FROM records WHERE severity >= 5 OR logger = 'd'", .right),
        ("SELECT upper(level), count(*) FROM records WHERE lower(level) = 'error' GROUP BY 1",
         "SELECT 'ERROR', count(*) FROM records WHERE severity = 6", .right),
        ("SELECT count(*) FROM records WHERE logger > 'b' AND message LIKE '%1%'",
         "SELECT count(*) FROM records WHERE logger > 'b' AND message LIKE '%1%'", .right),
    ]

    func testLevelMeansSeverityWhereverItIsEvaluatedOrTheQueryIsRefused() throws {
        let path = try levelsBundle()
        let query = try LogQuery(sources: [path])
        for (levelSQL, severitySQL, expected) in Self.questions {
            let truth: [[QueryValue]]
            do { truth = try query.rows(severitySQL).map(\.values) } catch { XCTFail("\(severitySQL): \(error)"); continue }
            XCTAssertFalse(truth.isEmpty, severitySQL)
            switch expected {
            case .right:
                do { let answer = try query.rows(levelSQL).map(\.values); XCTAssertEqual(answer, truth, levelSQL) } catch { XCTFail("\(levelSQL): \(error)") }
            case .refused:
                XCTAssertThrowsError(try query.rows(levelSQL), "answered \(String(describing: try? query.rows(levelSQL).map(\.values))), due \(truth): \(levelSQL)") { error in
                    XCTAssertTrue("\(error)".contains("severity") && "\(error)".contains("COLLATE level"), "\(error)")
                }
            }
        }
        // The refusal says the same for a condition tested on records read one at a time.
        XCTAssertThrowsError(try query.condition("ifnull(level, '') >= 'warning'")) { error in
            XCTAssertTrue("\(error)".contains("compares a level as text"), "\(error)")
        }
        XCTAssertNoThrow(try query.condition("level >= 'warning' AND upper(level) != 'ERROR'"))
    }
}
