import XCTest

import DaemonSettings
import ConfabProtocol
import Config

final class ProfileSettingsTests: XCTestCase {
    private func load(_ text: String) throws -> Settings {
        try Settings.load(text: text, path: "config.toml", environment: ["ANTHROPIC_API_KEY": "sk-ant"])
    }

    private func assertRejected(_ text: String, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try load(text), file: file, line: line) { error in
            XCTAssertEqual((error as? ConfigError)?.description, expected, file: file, line: line)
        }
    }

    func testEveryKey() throws {
        let settings = try load("""
            default_profile = "coder"

            [providers.claude]
            api = "anthropic"

            [profiles.coder]
            provider = "claude"
            model = "claude-sonnet-4-5"
            system = "Answer with code."
            temperature = 0
            top_p = 0.5
            max_tokens = 800
            stop = ["END", "STOP"]

            [profiles.guide]
            system = "You are Ada, a museum guide."
            presence_penalty = -1.5
            frequency_penalty = 2
            seed = 42
            welcome = ["Hello!", "Shall we start?"]
            quick_replies = ["yes", "no"]
            """)
        let profiles = settings.profileTable
        XCTAssertEqual(profiles.defaultName, "coder")
        XCTAssertEqual(profiles.sorted.map(\.name), ["coder", "guide"])
        XCTAssertEqual(profiles["coder"], Profile(
            name: "coder", provider: "claude", model: "claude-sonnet-4-5", system: "Answer with code.",
            params: SamplingParameters(temperature: 0, topP: 0.5, maxTokens: 800, stop: ["END", "STOP"])))
        XCTAssertEqual(profiles["guide"], Profile(
            name: "guide", provider: "default", system: "You are Ada, a museum guide.",
            params: SamplingParameters(presencePenalty: -1.5, frequencyPenalty: 2, seed: 42),
            welcome: ["Hello!", "Shall we start?"], quickReplies: ["yes", "no"]))
    }

    func testNoProfilesByDefault() throws {
        let settings = try load("")
        XCTAssertEqual(settings.profileTable, ProfileTable())
        XCTAssertNil(settings.profileTable.defaultProfile)
    }

    func testAProfileWithoutAProviderTakesTheDefaultProvider() throws {
        let settings = try load("""
            default_provider = "claude"
            [providers.claude]
            api = "anthropic"
            [profiles.plain]
            """)
        XCTAssertEqual(settings.profileTable["plain"]?.provider, "claude")
    }

    func testValuesOutOfRange() {
        let cases: [(String, String)] = [
            ("temperature = 2.5", "2: profiles.p.temperature must be a number from 0 to 2"),
            ("temperature = -0.1", "2: profiles.p.temperature must be a number from 0 to 2"),
            ("top_p = 1.01", "2: profiles.p.top_p must be a number from 0 to 1"),
            ("max_tokens = 0", "2: profiles.p.max_tokens must be at least 1"),
            ("presence_penalty = -2.5", "2: profiles.p.presence_penalty must be a number from -2 to 2"),
            ("frequency_penalty = 3", "2: profiles.p.frequency_penalty must be a number from -2 to 2"),
            (#"stop = ["a", "b", "c", "d", "e"]"#, "2: profiles.p.stop must hold at most 4 strings"),
            (#"stop = ["a", ""]"#, "2: profiles.p.stop must not hold an empty string"),
            (#"welcome = ["hi", " "]"#, "2: profiles.p.welcome must not hold an empty string"),
            (#"welcome = ["hi"]"# + "\n" + #"quick_replies = [""]"#, "3: profiles.p.quick_replies must not hold an empty string"),
            (#"quick_replies = ["yes"]"#, "2: profiles.p.quick_replies needs a welcome message to be offered under"),
            (#"model = "two words""#, "2: profiles.p.model must be 1 to 200 characters without spaces"),
        ]
        for (line, expected) in cases {
            assertRejected("[profiles.p]\n\(line)", "config.toml: line \(expected)")
        }
    }

    func testWrongTypes() {
        let cases: [(String, String)] = [
            (#"temperature = "hot""#, "profiles.p.temperature must be a number, not a string"),
            ("max_tokens = 1.5", "profiles.p.max_tokens must be an integer, not a float"),
            ("seed = true", "profiles.p.seed must be an integer, not a boolean"),
            (#"stop = "END""#, "profiles.p.stop must be an array of strings, not a string"),
            ("welcome = [1]", "profiles.p.welcome must be an array of strings, not one holding an integer"),
            ("system = 3", "profiles.p.system must be a string, not an integer"),
            (#"provider = ["a"]"#, "profiles.p.provider must be a string, not an array"),
            ("quick_replies = 2", "profiles.p.quick_replies must be an array of strings, not an integer"),
            ("top_p = []", "profiles.p.top_p must be a number, not an array"),
            (#"presence_penalty = "x""#, "profiles.p.presence_penalty must be a number, not a string"),
            (#"frequency_penalty = "x""#, "profiles.p.frequency_penalty must be a number, not a string"),
            ("model = 1", "profiles.p.model must be a string, not an integer"),
        ]
        for (line, expected) in cases {
            XCTAssertThrowsError(try load("[profiles.p]\n\(line)"), line) { error in
                let description = (error as? ConfigError)?.description ?? ""
                XCTAssertTrue(description.hasPrefix("config.toml: line 2: "), description)
                XCTAssertTrue(description.hasSuffix(expected), "\(description) does not end in \(expected)")
            }
        }
    }

    func testUnknownKeys() {
        assertRejected("[profiles.p]\ncolour = 1\n", "config.toml: unknown keys: profiles.p.colour (line 2)")
    }

    func testUnknownProvider() {
        assertRejected("""
            [profiles.p]
            provider = "nowhere"
            """, #"config.toml: line 2: profiles.p.provider names no configured provider: "nowhere" (there are: default)"#)
    }

    func testParametersTheAPIDoesNotTake() {
        for key in ["presence_penalty = 0.5", "frequency_penalty = 0.5", "seed = 7"] {
            let name = String(key.prefix { $0 != " " })
            assertRejected("""
                [providers.claude]
                api = "anthropic"
                [profiles.p]
                provider = "claude"
                \(key)
                """, #"config.toml: line 5: profiles.p.\#(name) is not a parameter of the anthropic API, which provider "claude" speaks"#)
        }
    }

    func testTheSameParametersAreFineForChatAndCompletions() throws {
        let settings = try load("""
            [providers.legacy]
            api = "completions"
            base_url = "http://127.0.0.1:9/v1"
            [profiles.a]
            presence_penalty = 0.5
            frequency_penalty = 0.5
            seed = 7
            [profiles.b]
            provider = "legacy"
            presence_penalty = 0.5
            frequency_penalty = 0.5
            seed = 7
            """)
        XCTAssertEqual(settings.profileTable["b"]?.params, SamplingParameters(presencePenalty: 0.5, frequencyPenalty: 0.5, seed: 7))
    }

    func testDefaultProfileMustExist() {
        assertRejected(#"default_profile = "x""#, #"config.toml: line 1: default_profile names no configured profile: "x" (there are none)"#)
        assertRejected("""
            default_profile = "x"
            [profiles.a]
            """, #"config.toml: line 1: default_profile names no configured profile: "x" (there are: a)"#)
    }

    func testProfileNames() {
        assertRejected(#"[profiles."a b"]"#, #"config.toml: line 1: profiles.a b is not a profile name: 1 to 64 letters, digits, - or _"#)
    }
}
