import Foundation
import LogbookTestKit
import XCTest

/// Every code example of README.md compiles: each ```swift block is type-checked on its own, as
/// the `main.swift` of a program (top-level code), against the package's built modules; the C
/// block is compiled against logbook.h. A README example that stops compiling fails here.
final class ReadmeSnippetTests: XCTestCase {
    /// The fenced blocks of `language` in a Markdown text, with the line each starts on.
    static func codeBlocks(_ language: String, in markdown: String) -> [(line: Int, code: String)] {
        var blocks: [(line: Int, code: String)] = []
        var current: (line: Int, lines: [Substring])?
        for (number, line) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if var open = current {
                if line.trimmingCharacters(in: .whitespaces) == "```" {
                    blocks.append((open.line, open.lines.joined(separator: "\n") + "\n"))
                    current = nil
                } else {
                    open.lines.append(line)
                    current = open
                }
            } else if line.trimmingCharacters(in: .whitespaces) == "```" + language {
                current = (number + 2, [])  // the code starts on the line after the fence (1-based)
            }
        }
        return blocks
    }

    var readme: String {
        get throws { try String(contentsOfFile: repositoryRoot + "/README.md", encoding: .utf8) }
    }

    func testEverySwiftSnippetOfTheReadmeTypeChecks() throws {
        let modules = try BuiltModules.find()
        let blocks = Self.codeBlocks("swift", in: try readme)
        XCTAssertGreaterThanOrEqual(blocks.count, 2, "README's Swift examples were not found")  // the Swift and swift-log examples; the modules' are in their DocC articles (DocCSnippetTests)
        for block in blocks {
            XCTAssertTrue(block.code.contains("import "), "README.md:\(block.line): a snippet names what it imports")
        }
        let results = modules.typecheck(blocks.map(\.code), in: makeTemporaryDirectory(self))
        for (block, result) in zip(blocks, results) {
            XCTAssertEqual(result.status, 0, "the snippet at README.md:\(block.line) does not compile:\n\(result.output)\n\(block.code)")
        }
    }

    /// The parser finds each block with the line it starts on, and only blocks of the language.
    func testCodeBlocksAreFoundWithTheirLines() {
        let markdown = "# T\n```swift\nlet a = 1\n```\ntext\n```sh\nls\n```\n```swift\nlet b = 2\nlet c = 3\n```\n"
        let blocks = Self.codeBlocks("swift", in: markdown)
        XCTAssertEqual(blocks.map(\.line), [3, 10])
        XCTAssertEqual(blocks.map(\.code), ["let a = 1\n", "let b = 2\nlet c = 3\n"])
    }

    /// A snippet that does not compile fails the check: the check can fail.
    func testABrokenSnippetIsCaught() throws {
        let modules = try BuiltModules.find()
        let results = modules.typecheck(
            ["import Logbook\nlet log = try LogBundle(path: \"/tmp/x.logbook\").logger(\"net\")\nlog.info(\"\\(undeclared)\")\n"],
            in: makeTemporaryDirectory(self))
        XCTAssertNotEqual(results[0].status, 0, results[0].output)
        XCTAssertTrue(results[0].output.contains("cannot find 'undeclared' in scope"), results[0].output)
    }

    /// The C example compiles against logbook.h (inside a `main`, as in Examples/c-example/main.c),
    /// and each C API call it shows is one that main.c makes.
    func testCSnippetOfTheReadmeCompiles() throws {
        let blocks = Self.codeBlocks("c", in: try readme)
        XCTAssertEqual(blocks.count, 1, "README's C example was not found")
        guard let block = blocks.first else { return }
        let compilers = ["/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"]
        guard let compiler = compilers.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("no C compiler at \(compilers): the README's C example cannot be checked here")
        }
        let source = makeTemporaryDirectory(self) + "/snippet.c"
        try ("#include \"logbook.h\"\n\nint main(int argc, char **argv) {\n#line \(block.line) \"README.md\"\n"
             + block.code + "    return 0;\n}\n").write(toFile: source, atomically: true, encoding: .utf8)
        let result = try runProgram(compiler, [
            "-fsyntax-only", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
            "-I", repositoryRoot + "/CSources/CLogbook/include", source,
        ])
        XCTAssertEqual(result.status, 0, "the C example at README.md:\(block.line) does not compile:\n\(result.output)")

        let example = try String(contentsOfFile: repositoryRoot + "/Examples/c-example/main.c", encoding: .utf8)
        let calls = block.code.matches(of: /\b(lb_[a-z_]+|LB_[A-Z]+)\(/).map { String($0.output.1) }
        XCTAssertFalse(calls.isEmpty)
        for call in Set(calls) {
            XCTAssertTrue(example.contains(call + "("), "README's C example calls \(call), which main.c does not")
        }
    }
}
