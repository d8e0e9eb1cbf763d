#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import Posix
import Terminal

/// `confab attachment ID MSG N > file`: one attached file's exact bytes on standard output.
struct AttachmentCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "attachment",
        abstract: "Write a file attached to a message to standard output.",
        discussion: """
            N counts from 1: the first [attached: ...] line under the message in confab show \
            and attach is 1. The bytes are written exactly as they were attached; redirect \
            them to a file (confab attachment k3v9 m3 1 > diagram.png). An image is not \
            written to a terminal unless --force; a text file on a terminal is shown with \
            anything that would drive the terminal made visible (--force writes it as it is).
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Argument(help: ArgumentHelp("The message that carries the file (m3; confab show lists them).", valueName: "msg")) var message: String
    @Argument(help: ArgumentHelp("Which of its files, from 1.", valueName: "n")) var number: Int
    @Flag(name: [.short, .long], help: "Write an image to a terminal, and a text file there as it is.") var force = false

    func validate() throws {
        if MessageID.order(of: message) == nil {
            throw ValidationError("'\(SafeText.singleLine(message))' is not a message id (such as m3: confab show lists them)")
        }
        if number < 1 { throw ValidationError("N counts the message's files from 1") }
    }

    func run() throws {
        let connection = try Connection.start(socketPath, command: "attachment")
        let conversation = try connection.resolveConversation(id)
        let toTerminal = isatty(1) != 0
        var offset = 0
        var expected: Attachment?
        // Text for a terminal is shown whole once it is all here, made safe; everything else
        // goes out as it comes.
        var held: [UInt8] = []
        while true {
            let params = AttachmentGetParams(conversation: conversation, message: message, index: number - 1, offset: offset)
            let raw: JSON
            do throws(Failure) {
                raw = try connection.call(.attachmentGet, params.json)
            } catch {
                if case .rpc(let refusal) = error, offset == 0 {
                    throw Failure.message("\(message) file \(number): \(refusal.message)")
                }
                throw error
            }
            guard let answer = try? AttachmentGetResult(decoding: raw), let data = Base64.decode(answer.data), answer.offset == offset else {
                throw Failure.message("confabd's answer to \(RPCMethod.attachmentGet.rawValue) is not a piece of the file")
            }
            let attachment = answer.attachment
            if expected == nil {
                expected = attachment
                if toTerminal, attachment.type.isImage, !force {
                    throw Failure.message("not writing \(AttachmentText.summary(name: attachment.name, size: attachment.size, type: attachment.type)) "
                        + "to a terminal: redirect it to a file (> FILE), or give --force")
                }
            } else if expected != attachment {
                throw Failure.message("\(message) file \(number) changed while it was being read")
            }
            offset += data.count
            guard offset <= attachment.size else {
                throw Failure.message("confabd sent more of \(SafeText.singleLine(attachment.name)) than its size")
            }
            if toTerminal, !force {
                held += data
            } else {
                Out.stdout(data)
            }
            if !answer.more { break }
            guard !data.isEmpty else { throw Failure.message("confabd sent an empty piece of the file with more to come") }
        }
        if let expected, offset != expected.size {
            throw Failure.message("\(SafeText.singleLine(expected.name)) ended after \(offset) of its \(expected.size) bytes")
        }
        if !held.isEmpty { Out.stdout(SafeText.sanitized(String(decoding: held, as: UTF8.self))) }
    }
}
