import Foundation
import LogbookTestKit
import XCTest
@testable import Logbook
import LogbookTesting

/// Errors of every kind described as `String(describing:)` does, also from many threads while the
/// table of error types grows.
final class NativeMetadataConcurrencyTests: XCTestCase {
    typealias FetchError = NativeMetadataTests.FetchError

    enum Phase: Error { case connect, handshake, transfer }

    enum Coded: Error { case code(Int), unknown }

    struct PlainCode: Error { var value: Int32 }

    struct Wide: Error { var a: Int, b: Int }

    final class Boxed: Error { let reason = "boxed" }

    class BaseError: Error, CustomStringConvertible, @unchecked Sendable { var description: String { "base" } }

    final class SubError: BaseError { override var description: String { "sub" } }

    class PlainBase: Error, @unchecked Sendable {}

    final class PlainSub: PlainBase {}

    struct Streamed: Error, TextOutputStreamable, CustomStringConvertible {
        var description: String { "the description" }
        func write<Target: TextOutputStream>(to target: inout Target) { target.write("streamed") }
    }

    struct Debugged: Error, CustomDebugStringConvertible { var debugDescription: String { "debugged" } }

    struct Generic<T>: Error { var value: T }

    /// A mirror of its own, which may change from call to call: not described by its bytes.
    struct Mirrored: Error, CustomReflectable {
        nonisolated(unsafe) static var calls = 0
        var customMirror: Mirror {
            Mirrored.calls += 1
            return Mirror(self, children: ["call": Mirrored.calls])
        }
    }

    /// An error is recorded as `String(describing:)` and `String(reflecting:)` of its type say,
    /// whatever it is: enums with and without payloads (each case, repeatedly: descriptions of a
    /// plain value are kept by its bytes), plain structs, classes, the description protocols in
    /// `String(describing:)`'s order, generic types with different arguments, types inside a
    /// function; from many threads at once. Each is logged the four ways a call can hold it: as
    /// `any Error` (opened to its type: no box), as `(any Error)?` (the box), as a generic argument
    /// that is `any Error` itself, and with its static type (below: the generic overloads).
    func testErrorsOfEveryKindAreDescribedAsStringDescribingDoes() throws {
        struct Local: Error { var n: UInt8 }
        let errors: [any Error] = [
            Phase.connect, Phase.handshake, Phase.transfer, Coded.code(7), Coded.unknown, Coded.code(-1),
            PlainCode(value: 3), PlainCode(value: -3), Wide(a: 1, b: 2), Boxed(), Streamed(), Debugged(),
            Generic(value: 1), Generic(value: "one"), Generic(value: [1.5]), Local(n: 9), Local(n: 10),
            FetchError(code: 5), CocoaError(.fileNoSuchFile), URLError(.timedOut),
            // Subclass instances boxed as their superclass (found by adversarial review: a crash).
            SubError() as BaseError, BaseError(), SubError(), PlainSub() as PlainBase, PlainSub(),
            NSError(domain: "d", code: 1), { () -> any Error in
                final class SubNSError: NSError, @unchecked Sendable {}
                let error: NSError = SubNSError(domain: "sub", code: 2)
                return error
            }(),
        ]
        let capture = try LogCapture()
        let log = try capture.logger("errors")
        let threads = 4, rounds = 50
        @Sendable func viaGeneric<E: Error>(_ errors: [E], _ index: Int, _ message: String) { log.error("\(message)", error: errors[index]) }
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for round in 0..<rounds {
                for (index, error) in errors.enumerated() {
                    log.error("t\(thread) r\(round) opened e\(index)", error: error)
                    let optional: (any Error)? = error
                    log.error("t\(thread) r\(round) boxed e\(index)", error: optional)
                    viaGeneric(errors, index, "t\(thread) r\(round) generic e\(index)")
                }
            }
        }
        let entries = try capture.entries(logger: "errors")
        XCTAssertEqual(entries.count, threads * rounds * errors.count * 3)
        for entry in entries {
            let index = Int(entry.message.split(separator: "e").last!)!
            let expected = LoggedError(type: String(reflecting: type(of: errors[index])), description: String(describing: errors[index]))
            XCTAssertEqual(entry.error?.description, expected.description, entry.message)
            XCTAssertEqual(entry.error, LoggedError(errors[index]), entry.message)
            if !expected.type.contains("unknown context") { XCTAssertEqual(entry.error?.type, expected.type) }
        }
        // Static types: a value of its own type, generic types, a local type, classes boxed as
        // their superclass.
        log.error("static 1", error: Phase.handshake)
        log.error("static 2", error: Generic(value: "one"))
        log.error("static 3", error: Local(n: 9))
        log.error("static 4", error: SubError() as BaseError)
        log.error("static 5", metadata: ["k": 1], error: PlainSub() as PlainBase)
        log.log(.warning, "static 6", error: Streamed())
        log.error("static 7", error: Mirrored())
        let statics: [any Error] = [Phase.handshake, Generic(value: "one"), Local(n: 9), SubError(), PlainSub(), Streamed()]
        for (index, error) in statics.enumerated() {
            XCTAssertEqual(try capture.expect(message: "static \(index + 1)").error, LoggedError(error))
        }
        XCTAssertEqual(try capture.expect(message: "static 7").error?.description, String(describing: Mirrored()))
        XCTAssertEqual(LoggedError(Streamed()).description, "streamed")
        XCTAssertEqual(LoggedError(Debugged()).description, "debugged")
        XCTAssertEqual(LoggedError(Phase.handshake).description, "handshake")
        do {
            throw SubError()
        } catch let error as BaseError {
            XCTAssertEqual(LoggedError(error), LoggedError(type: "LogbookTests.NativeMetadataConcurrencyTests.SubError", description: "sub"))
            log.error("caught", error: error)
            XCTAssertEqual(try capture.expect(message: "caught").error?.description, "sub")
        } catch {
            XCTFail("\(error)")
        }
        XCTAssertEqual(LoggedError(Local(n: 9)).type, "LogbookTests.NativeMetadataConcurrencyTests.Local")
        for _ in 0..<3 { XCTAssertEqual(LoggedError(Mirrored()).description, String(describing: Mirrored())) }
    }

    struct WrapA<Inner>: Error, CustomStringConvertible {
        var n: Int
        var description: String { "a\(n)" }
    }

    struct WrapB<Inner>: Error {
        var n: Int
    }

    /// 512 error types made at run time (nine levels of `WrapA`/`WrapB`, by the bits of a number),
    /// first logged from four threads at once in different orders, so that types are added to the
    /// table of known types (and the table grown, five times) while other threads look types up
    /// in it: each record has its type's name and description, and a type has one entry.
    func testManyErrorTypesFromManyThreadsWhileTheTableGrows() throws {
        func error(_ n: Int) -> any Error {
            func build<T>(_: T.Type, bit: Int) -> any Error {
                if bit == 9 { return n % 2 == 0 ? WrapA<T>(n: n) as any Error : WrapB<T>(n: n) }
                return (n >> bit) & 1 == 0 ? build(WrapA<T>.self, bit: bit + 1) : build(WrapB<T>.self, bit: bit + 1)
            }
            return build(Int.self, bit: 0)
        }
        let count = 512, threads = 4
        let errors = (0..<count).map(error)
        XCTAssertEqual(Set(errors.map { ObjectIdentifier(type(of: $0)) }).count, count, "distinct types")
        let capture = try LogCapture()
        let log = try capture.logger("types")
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for i in 0..<count {
                let index = (i * (2 * thread + 1) + thread * 131) % count
                log.error("e\(index)", error: errors[index])
            }
        }
        let entries = try capture.entries(logger: "types")
        XCTAssertEqual(entries.count, count * threads)
        for entry in entries {
            let index = Int(entry.message.dropFirst())!
            XCTAssertEqual(entry.error?.type, String(reflecting: type(of: errors[index])), entry.message)
            XCTAssertEqual(entry.error?.description, String(describing: errors[index]), entry.message)
        }
        for error in errors {
            XCTAssertTrue(ErrorType.of(type(of: error)) === ErrorType.of(type(of: error)))
            XCTAssertEqual(ErrorType.of(type(of: error)).name, String(reflecting: type(of: error)))
        }
    }
}
