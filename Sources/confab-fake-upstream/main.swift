// confab-fake-upstream: a fake OpenAI-compatible chat-completions server on loopback, used by
// confab's integration tests and benchmarks. See docs/fake-upstream.md.

runServer(parseArguments(Array(CommandLine.arguments.dropFirst())))
