import ArgumentParser
import ConfabProtocol
import Terminal

struct ModelsCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "models",
        abstract: "List the models each configured provider offers.",
        discussion: """
            Asks every provider (or the one named) for its model listing; confabd keeps each \
            listing for a minute. A provider that cannot answer is reported on stderr; the exit \
            status is 1 only when none could.
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Option(help: ArgumentHelp("Only this provider's models.", valueName: "name")) var provider: String?
    @Flag(help: "Print the raw result object as JSON.") var json = false

    func run() throws {
        let connection = try Connection.start(socketPath, command: "models")
        let raw = try connection.call(.modelsList, ModelsListParams(provider: provider).json)
        let result = try Connection.read(ModelsListCall.self, raw)
        if json {
            Out.json(raw)
        } else {
            Out.stdout(Self.table(result.models))
            for failure in result.errors {
                Out.error(SafeText.singleLine(Self.failure(failure)))
            }
        }
        let failed = Set(result.errors.map(\.provider))
        let answered = Set(result.models.map(\.provider))
        if !failed.isEmpty && answered.isEmpty { throw Failure.exit(1) }
    }

    /// A provider that could not list its models, in words (`--json` keeps the code):
    /// `provider work could not list its models: the model server refused the API key (HTTP 401: …)`.
    static func failure(_ failure: ModelListingError) -> String {
        "provider \(failure.provider) could not list its models: \(Words.replyError(failure.error))"
    }

    /// `PROVIDER  MODEL`, one model a line; nothing at all when there are none. Names come from
    /// model servers, so each is made a safe single line before it is measured.
    static func table(_ models: [ListedModel]) -> String {
        guard !models.isEmpty else { return "" }
        let rows = models.map { model in (SafeText.singleLine(model.provider), SafeText.singleLine(model.id)) }
        let width = max(DisplayWidth.of("PROVIDER"), rows.map { DisplayWidth.of($0.0) }.max() ?? 0)
        var text = DisplayWidth.pad("PROVIDER", to: width) + "  MODEL\n"
        for (provider, id) in rows { text += DisplayWidth.pad(provider, to: width) + "  " + id + "\n" }
        return text
    }
}
