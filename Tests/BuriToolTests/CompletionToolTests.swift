import Foundation
import Testing

@Suite("buri --generate-completion-script prints a working completion script")
struct CompletionToolTests {
    static let commands = [
        "info", "buckets", "keys", "get", "query", "search", "export", "import", "restore", "put", "delete", "drop",
        "check", "repair", "stats", "compact", "migrate", "values", "get-value", "set-value", "rekey", "key",
        "encrypt",
    ]

    @Test(arguments: ["bash", "zsh", "fish"])
    func everyShellGetsAScriptNamingEveryCommand(shell: String) throws {
        let run = try buri("--generate-completion-script", shell)
        expectSuccess(run)
        #expect(run.stdout.count > 1000, "\(run)")
        for command in Self.commands { #expect(run.stdout.contains(command), "\(shell): \(command) missing") }
        // Options of the newest commands are in it too.
        #expect(run.stdout.contains("skip-damaged"))
        #expect(run.stdout.contains("above"))
        #expect(run.stdout.contains("text-index"))
        #expect(run.stdout.contains("key-file") && run.stdout.contains("plaintext-index"))
    }

    @Test func theBashScriptLoadsAndCompletesTheCommands() throws {
        let sandbox = try Sandbox()
        let script = try buri("--generate-completion-script", "bash")
        let path = try sandbox.write("buri.bash", script.stdout)
        // Sourced into bash, it registers itself, and completing `buri ` offers every command.
        // As an interactive shell runs it: without errexit and nounset.
        let run = try runShell(
            """
            set +eu
            source '\(path)'
            complete -p buri
            COMP_WORDS=(buri ""); COMP_CWORD=1; COMP_LINE="buri "; COMP_POINT=5
            _buri
            printf '%s\\n' "${COMPREPLY[@]}"
            """, in: sandbox.url)
        #expect(run.status == 0, "\(run)")
        #expect(run.lines.first == "complete -o filenames -F _buri buri", "\(run)")
        #expect(Set(run.lines.dropFirst()).isSuperset(of: Self.commands), "\(run)")
    }

    @Test func anUnknownShellIsAUsageError() throws {
        expectFailure(
            try buri("--generate-completion-script", "tcsh"), status: 2, mentioning: ["tcsh", "zsh bash fish"])
    }
}
