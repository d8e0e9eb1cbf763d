import XCTest

import ConfabProtocol
import Config
import DaemonSettings

final class PriceSettingsTests: XCTestCase {
    func testPricesByProviderAndModel() throws {
        let settings = try load("""
            [upstream]
            model = "gpt-4o-mini"

            [upstream.prices.gpt-4o-mini]
            input = 0.15
            cached_input = 0.075
            output = 0.6

            [providers.claude]
            api = "anthropic"
            api_key = "k"

            [providers.claude.prices."claude-sonnet-4.5"]
            input = 3
            cached_input = 0.3
            cache_write = 3.75
            output = 15
            """)
        XCTAssertEqual(settings.prices.price(provider: "default", model: "gpt-4o-mini"),
                       ModelPrice(input: 0.15, cachedInput: 0.075, cacheWrite: 0.15, output: 0.6))
        XCTAssertEqual(settings.prices.price(provider: "claude", model: "claude-sonnet-4.5"),
                       ModelPrice(input: 3, cachedInput: 0.3, cacheWrite: 3.75, output: 15))
        XCTAssertNil(settings.prices.price(provider: "default", model: "claude-sonnet-4.5"), "a price is its provider's")
        XCTAssertNil(settings.prices.price(provider: "claude", model: "gpt-4o-mini"))
        XCTAssertTrue(try load("").prices.isEmpty)
    }

    func testCostOfAUsage() {
        let price = ModelPrice(input: 3, cachedInput: 0.3, cacheWrite: 3.75, output: 15)
        // 1,000,000 in: 600,000 read from the cache, 100,000 written to it, 300,000 at full price; 200,000 out.
        let usage = Usage(promptTokens: 1_000_000, completionTokens: 200_000, totalTokens: 1_200_000,
                          cacheReadTokens: 600_000, cacheWriteTokens: 100_000)
        XCTAssertEqual(price.cost(of: usage), 0.9 + 0.18 + 0.375 + 3, accuracy: 1e-9)
        // Without cache prices every input token costs `input`.
        XCTAssertEqual(ModelPrice(input: 2, output: 8).cost(of: usage), 2 + 1.6, accuracy: 1e-9)
    }

    func testRejectedPrices() {
        assertRejected("[upstream.prices.m]\ninput = -1\noutput = 2\n",
                       "config.toml: line 2: upstream.prices.m.input must be a price of zero or more per million tokens, not -1.0")
        assertRejected("[upstream.prices.m]\ninput = 1\noutput = \"2\"\n",
                       "config.toml: line 3: upstream.prices.m.output must be a number, not a string")
        assertRejected("[upstream.prices.m]\ninput = 1\n", "config.toml: line 1: upstream.prices.m needs output: the price of a million output tokens")
        assertRejected("[upstream.prices.m]\n\noutput = 1\n", "config.toml: line 1: upstream.prices.m needs input: the price of a million input tokens")
        assertRejected("[upstream]\nprices = 3\n", "config.toml: line 2: upstream.prices must be a table, not an integer")
        assertRejected("[providers.x]\nbase_url = \"http://127.0.0.1:1\"\n[providers.x.prices.m]\ninput = 1\noutput = 2\ncache_read = 0.1\n",
                       "config.toml: unknown keys: providers.x.prices.m.cache_read (line 6)")
        assertRejected("[upstream.prices.m]\ninput = 1\noutput = 2\ncahced_input = 0.5\n",
                       "config.toml: unknown keys: upstream.prices.m.cahced_input (line 4; did you mean upstream.prices.m.cached_input?)")
    }
}
