import Foundation
import LogbookTestKit
import XCTest

/// Every code example of the DocC catalogs (`Sources/<Module>/<Module>.docc/*.md`) compiles, as
/// README.md's do (ReadmeSnippetTests): each ```swift block is type-checked on its own, as the
/// `main.swift` of a program, against the package's built modules; a C block that is a whole
/// program is compiled against logbook.h. An article whose example stops compiling fails here.
final class DocCSnippetTests: XCTestCase {
    /// The one Swift example that imports a module of the reader's own (the C target `Worker` the
    /// C API article defines in its text), which this package does not build.
    static let foreignModules = ["Worker"]

    /// Every article and landing page of every catalog, with its path relative to the repository.
    static func articles() throws -> [(path: String, text: String)] {
        let sources = repositoryRoot + "/Sources"
        var articles: [(path: String, text: String)] = []
        for module in try FileManager.default.contentsOfDirectory(atPath: sources).sorted() {
            let catalog = "\(sources)/\(module)/\(module).docc"
            guard let files = try? FileManager.default.contentsOfDirectory(atPath: catalog) else { continue }
            for file in files.sorted() where file.hasSuffix(".md") {
                let path = "\(catalog)/\(file)"
                articles.append((String(path.dropFirst(repositoryRoot.count + 1)),
                                 try String(contentsOfFile: path, encoding: .utf8)))
            }
        }
        return articles
    }

    func testEverySwiftSnippetOfTheCatalogsTypeChecks() throws {
        let modules = try BuiltModules.find()
        let articles = try Self.articles()
        XCTAssertTrue(articles.contains { $0.path == "Sources/Logbook/Logbook.docc/GettingStarted.md" },
                      "the catalogs were not found: \(articles.map(\.path))")
        var snippets: [(place: String, code: String)] = []
        for article in articles {
            for block in ReadmeSnippetTests.codeBlocks("swift", in: article.text) {
                XCTAssertTrue(block.code.contains("import "), "\(article.path):\(block.line): a snippet names what it imports")
                if Self.foreignModules.contains(where: { block.code.contains("import \($0)\n") }) { continue }
                snippets.append(("\(article.path):\(block.line)", block.code))
            }
        }
        XCTAssertGreaterThanOrEqual(snippets.count, 15, "the catalogs' Swift examples were not found")
        let results = modules.typecheck(snippets.map(\.code), in: makeTemporaryDirectory(self))
        for (snippet, result) in zip(snippets, results) {
            XCTAssertEqual(result.status, 0, "the snippet at \(snippet.place) does not compile:\n\(result.output)\n\(snippet.code)")
        }
    }

    /// A C example that is a whole program (it has a `main`) compiles against logbook.h.
    func testEveryCProgramOfTheCatalogsCompiles() throws {
        let compilers = ["/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"]
        guard let compiler = compilers.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("no C compiler at \(compilers): the catalogs' C examples cannot be checked here")
        }
        var checked = 0
        for article in try Self.articles() {
            for block in ReadmeSnippetTests.codeBlocks("c", in: article.text) where block.code.contains("int main(") {
                let source = makeTemporaryDirectory(self) + "/snippet.c"
                try ("#line \(block.line) \"\(article.path)\"\n" + block.code).write(toFile: source, atomically: true, encoding: .utf8)
                let result = try runProgram(compiler, [
                    "-fsyntax-only", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
                    "-I", repositoryRoot + "/CSources/CLogbook/include", source,
                ])
                XCTAssertEqual(result.status, 0, "the C example at \(article.path):\(block.line) does not compile:\n\(result.output)")
                checked += 1
            }
        }
        XCTAssertGreaterThanOrEqual(checked, 1, "the C API article's program was not found")
    }
}
