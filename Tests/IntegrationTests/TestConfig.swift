/// Config tables several suites use as they are, written once: a suite's own config names
/// them by interpolation and adds what is its own.
enum TestConfig {
    /// A tool `echo` that says back its `city` through the fake upstream's `/tool/echo/CITY`.
    static let echoTool = """
        [tools.echo]
        description = "Says back what it was asked"
        parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
        [tools.echo.request]
        method = "GET"
        url = "$UPSTREAM/tool/echo/{city}"
        """

    /// A provider `claude` on the fake upstream's Anthropic Messages endpoint.
    static let claudeProvider = """
        [providers.claude]
        api = "anthropic"
        base_url = "$UPSTREAM/anthropic/v1"
        api_key = "anthropic-test-key"
        model = "fake-claude"
        """
}
