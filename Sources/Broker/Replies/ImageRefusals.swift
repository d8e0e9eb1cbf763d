import ConfabProtocol
import Upstream

/// What the daemon learns of the images a model server refuses, so that one image it cannot
/// take (a file that starts like a PNG and is junk, a format it cannot decode, or a server that
/// takes no images while `vision` says it does) does not break a conversation for good: every
/// reply sends the history again, and would send that image again.
///
/// A request that carried images and was refused as a request the server will not take (see
/// `isImageRefusal`, or a 2xx with no answer at all) is sent once more with each image as a line
/// naming it. When that is taken, the images to blame are remembered for the conversation,
/// provider and model, until the config is loaded again (or the conversation is deleted): later
/// requests of that conversation send them as the line, while new images are still tried.
/// What is learnt stays within what the sender could affect: junk images sent in one
/// conversation never turn images off for the other conversations (and users) of the model,
/// which at worst pay one refused request each for an image that is refused there too. The images to blame are those the model was never seen to take (a request holding
/// them answered); when every image of the request was taken before, all of them are. A model
/// that refused requests with images twice and never took one takes none: it is sent no image
/// at all, rather than one refused request for each new image.
struct ImageRefusals {
    /// Digests remembered per provider and model, each set at most this many (then it starts
    /// over: what was forgotten costs at most one refused request again).
    static let maxRemembered = 4096

    private struct Memory {
        var refused: Set<String> = []
        var taken: Set<String> = []
        var refusals = 0
    }

    /// Refused requests with images, none ever taken, after which a model is sent no image.
    static let refusalsMeaningNoImages = 2

    private var byModel: [String: Memory] = [:]

    /// Whether a model server's error is its refusal of the request as sent, which another form
    /// of it may pass: a 4xx other than a key it refuses (401, 403), a missing model (404), a
    /// timeout (408), a body too large (413, which the images' own bound is for) or too many
    /// requests (429, which the usual retries are for).
    static func isImageRefusal(_ error: MessageError) -> Bool {
        guard error.code == .upstreamHTTP, let status = error.status, (400..<500).contains(status) else { return false }
        return ![401, 403, 404, 408, 413, 429].contains(status)
    }

    /// The reason an image stands as a line in the request sent again.
    static let refusedReason = "the model server refused the request with images"

    /// The digests of the images the request sends as images.
    static func imageDigests(in messages: [ChatMessage]) -> [String] {
        var digests: [String] = []
        for message in messages {
            for image in message.images where !digests.contains(image.sha256) { digests.append(image.sha256) }
        }
        return digests
    }

    /// Every image the turns send (or are to send, once read) as an image goes as the line
    /// naming it, with `reason` (of `only` those digests, when given). Returns how many did.
    @discardableResult
    static func replacingImages(in messages: inout [ChatMessage], reason: String, only digests: Set<String>? = nil) -> Int {
        var replaced = 0
        for turn in messages.indices {
            for index in messages[turn].attachments.indices {
                let image = messages[turn].attachments[index]
                guard image.type.isImage, digests.map({ $0.contains(image.sha256) }) ?? true else { continue }
                switch image.content {
                case .image, .unread: break
                case .text, .line: continue
                }
                messages[turn].attachments[index].content = .line(ChatAttachment.imageNotSentLine(
                    name: image.name, type: image.type, size: image.size, reason: reason))
                replaced += 1
            }
        }
        return replaced
    }

    /// The images the model's requests were refused with before.
    func refused(in conversation: String, provider: String, model: String) -> Set<String> {
        byModel[Self.key(conversation, provider, model)]?.refused ?? []
    }

    /// Whether the model refused every request with images it was sent, twice or more.
    func takesNoImages(in conversation: String, provider: String, model: String) -> Bool {
        guard let memory = byModel[Self.key(conversation, provider, model)] else { return false }
        return memory.taken.isEmpty && memory.refusals >= Self.refusalsMeaningNoImages
    }

    /// A request holding `digests` as images was answered: the model takes them.
    mutating func took(_ digests: [String], in conversation: String, provider: String, model: String) {
        guard !digests.isEmpty else { return }
        let key = Self.key(conversation, provider, model)
        var memory = byModel[key] ?? Memory()
        if memory.taken.count + digests.count > Self.maxRemembered { memory.taken = [] }
        memory.taken.formUnion(digests)
        memory.refusals = 0
        byModel[key] = memory
    }

    /// A request holding `digests` as images was refused, and taken without them: remembers the
    /// ones to blame and returns them.
    @discardableResult
    mutating func refusedImages(_ digests: [String], in conversation: String, provider: String, model: String) -> [String] {
        let key = Self.key(conversation, provider, model)
        var memory = byModel[key] ?? Memory()
        let untried = digests.filter { !memory.taken.contains($0) }
        let blamed = untried.isEmpty ? digests : untried
        if memory.refused.count + blamed.count > Self.maxRemembered { memory.refused = [] }
        memory.refused.formUnion(blamed)
        memory.taken.subtract(blamed)
        memory.refusals += 1
        byModel[key] = memory
        return blamed
    }

    /// The config was loaded again: a provider's server or model may have changed.
    mutating func forgetAll() { byModel = [:] }

    /// The conversation is gone: what its images taught goes with it.
    mutating func forget(conversation: String) {
        byModel = byModel.filter { !$0.key.hasPrefix(conversation + "\u{0}") }
    }

    private static func key(_ conversation: String, _ provider: String, _ model: String) -> String {
        conversation + "\u{0}" + provider + "\u{0}" + model
    }
}
