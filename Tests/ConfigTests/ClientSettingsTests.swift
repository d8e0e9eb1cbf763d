import XCTest

import ClientConfig
import Config

/// `[client]`: read by `confab attach` through `ClientSettings`, checked by confabd through
/// the same type, with the environment over the file (`NotifySetting`).
final class ClientSettingsTests: XCTestCase {
    private func read(_ text: String) throws -> ClientSettings {
        try ClientSettings(configText: text, file: "config.toml")
    }

    private func problem(_ text: String) -> String {
        do throws(ClientSettings.Problem) {
            _ = try ClientSettings(configText: text, file: "config.toml")
            return "no problem"
        } catch {
            return error.description
        }
    }

    func testTheTableIsRead() throws {
        XCTAssertEqual(try read("[client]\nnotify = \"osc777\"\nnotify_idle_seconds = 5\n"),
                       ClientSettings(notify: "osc777", notifyIdleSeconds: 5))
        XCTAssertEqual(try read("[upstream]\nmodel = \"m\"\n"), ClientSettings(), "no [client]: nothing set")
        XCTAssertEqual(try read(""), ClientSettings())
        for choice in ["osc9", "osc777", "bell", "off", "auto"] {
            XCTAssertEqual(try read("[client]\nnotify = \"\(choice)\"\n").notify, choice)
        }
        XCTAssertEqual(try read("client = { notify_idle_seconds = 0 }\n").notifyIdleSeconds, 0)
    }

    func testEachMistakeIsSaidWithTheFileAndTheLine() {
        XCTAssertEqual(problem("[client]\n\nnotify = \"osc8\"\n"),
                       "config.toml: line 3: client.notify must be one of osc9, osc777, bell, off, auto, not \"osc8\"")
        XCTAssertEqual(problem("[client]\nnotify = true\n"), "config.toml: line 2: client.notify must be a string, not a boolean")
        XCTAssertEqual(problem("[client]\nnotify_idle_seconds = -1\n"),
                       "config.toml: line 2: client.notify_idle_seconds must be from 0 to 86400, not -1")
        XCTAssertEqual(problem("[client]\nnotify_idle_seconds = \"30\"\n"),
                       "config.toml: line 2: client.notify_idle_seconds must be an integer, not a string")
        XCTAssertEqual(problem("client = 3\n"), "config.toml: line 1: client must be a table, not an integer")
        XCTAssertTrue(problem("[client\n").hasPrefix("config.toml: line 1: "), problem("[client\n"))
        // Nothing written in the file reaches a terminal through a message.
        XCTAssertEqual(problem("[client]\nnotify = \"\\u001b]0;x\"\n"),
                       "config.toml: line 2: client.notify must be one of osc9, osc777, bell, off, auto, not \"\\u{1B}]0;x\"")
    }

    func testAnUnknownKeyIsSaidWithWhatItProbablyMeant() {
        XCTAssertEqual(problem("[client]\nnotfy = \"bell\"\n"),
                       "config.toml: unknown keys: client.notfy (line 2; did you mean client.notify?)")
        XCTAssertEqual(problem("[client]\nnotify = \"bell\"\nnotify_idle_second = 3\ncolour = 1\n"),
                       "config.toml: unknown keys: client.notify_idle_second (line 3; did you mean client.notify_idle_seconds?), client.colour (line 4)")
    }

    /// confabd accepts `[client]` and refuses its mistakes as it does every table's.
    func testTheDaemonChecksTheTable() throws {
        XCTAssertNoThrow(try load("[client]\nnotify = \"bell\"\nnotify_idle_seconds = 120\n"))
        assertRejected("[client]\nnotify = \"loud\"\n",
                       "config.toml: line 2: client.notify must be one of osc9, osc777, bell, off, auto, not \"loud\"")
        assertRejected("[client]\nnotify_idel_seconds = 3\n",
                       "config.toml: unknown keys: client.notify_idel_seconds (line 2; did you mean client.notify_idle_seconds?)")
        assertRejected("[clinet]\nnotify = \"bell\"\n", "config.toml: unknown keys: clinet (line 1; did you mean client?)")
    }

    func testTheEnvironmentOverridesTheFile() {
        let file = ClientSettings(notify: "bell", notifyIdleSeconds: 5)
        XCTAssertEqual(NotifySetting(file: file, notifyVariable: nil, idleVariable: nil),
                       NotifySetting(choice: "bell", idleSeconds: 5))
        XCTAssertEqual(NotifySetting(file: file, notifyVariable: "OSC9", idleVariable: " 0 "),
                       NotifySetting(choice: "osc9", idleSeconds: 0))
        XCTAssertEqual(NotifySetting(file: ClientSettings(), notifyVariable: nil, idleVariable: nil),
                       NotifySetting(choice: "auto", idleSeconds: 30), "neither says: auto, 30 seconds")
        let wrong = NotifySetting(file: file, notifyVariable: "loud", idleVariable: "soon")
        XCTAssertNil(wrong.choice, "a kind nobody can tell is meant: no notifications")
        XCTAssertEqual(wrong.idleSeconds, 5, "an idle time that is no number leaves the file's")
        XCTAssertEqual(wrong.warnings, [
            "CONFAB_NOTIFY=loud is none of osc9, osc777, bell, off, auto: no notifications",
            "CONFAB_NOTIFY_IDLE=soon is not a number of seconds from 0 to 86400: 5 it is",
        ])
    }
}
