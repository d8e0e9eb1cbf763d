#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import LineEditor
import Posix
import Terminal

/// Writing a message in the user's editor.
enum Editor {
    struct Failed: Error, CustomStringConvertible {
        let description: String
    }

    static func compose(with editor: String, initial: String = "") throws(Failed) -> String {
        let directory = Environment.get("TMPDIR").flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        let fd: Int32, path: String
        do {
            (fd, path) = try Files.makeTemporaryFile(in: directory, prefix: "confab-message-", suffix: ".md")
        } catch {
            throw Failed(description: "cannot make a temporary file: \(error)")
        }
        let written = initial.isEmpty ? nil : Files.writeAll(fd, Array((initial + "\n").utf8)).failure
        Files.close(fd)
        if let written { throw Failed(description: "cannot write a temporary file: \(errorText(written))") }
        defer { try? Files.remove(path) }
        // Through the shell, as git runs it: EDITOR may hold arguments ("code --wait").
        let status = Spawn.wait(["/bin/sh", "-c", editor + " \"$1\"", "sh", path])
        guard status == 0 else { throw Failed(description: "\(editor) exited with status \(status); nothing sent") }
        do {
            var bytes = try Files.readAll(path: path, limit: 4 << 20)
            while let last = bytes.last, last == 0x0A || last == 0x0D { bytes.removeLast() }
            return String(decoding: bytes, as: UTF8.self)
        } catch {
            throw Failed(description: "cannot read \(path): \(error)")
        }
    }
}
