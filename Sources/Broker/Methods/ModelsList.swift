import ConfabProtocol
import ServiceSettings
import Upstream

extension Broker {
    /// `models.list {provider?}`: every configured provider's listing (or the one named), asked
    /// of all at once; one that fails is an entry in `errors`, never the whole call's failure.
    func listModels(_ params: ModelsListParams, _ respond: Respond) throws(RPCError) {
        let chosen: [Provider]
        if let name = params.provider {
            guard let provider = providers[name] else {
                throw .invalidParams("no provider \"\(name)\": the config has \(providers.names.joined(separator: ", "))")
            }
            chosen = [provider]
        } else {
            chosen = providers.names.compactMap { providers[$0] }
        }
        var answers: [String: ModelListing] = [:]
        var answered = false
        let call = models.track { error in
            answered = true
            respond(.failure(error))
        }
        for provider in chosen {
            models.listing(of: provider) { [unowned self] listing in
                guard !answered else { return }
                answers[provider.name] = listing
                // A kept listing answers before `listing` returns: the last answer may come from this loop.
                guard answers.count == chosen.count else { return }
                answered = true
                models.untrack(call)
                respond(.success(Self.modelsResult(chosen.map(\.name), answers).json))
            }
        }
    }

    /// `{models: [{id, provider}], errors: [{provider, code, message, status?}]}`, providers by
    /// name, each one's models in the order its server gave them.
    static func modelsResult(_ names: [String], _ answers: [String: ModelListing]) -> ModelsListResult {
        var result = ModelsListResult()
        for name in names {
            switch answers[name] {
            case .success(let ids)?:
                result.models += ids.map { ListedModel(id: $0, provider: name) }
            case .failure(let error)?:
                result.errors.append(ModelListingError(provider: name, error: error))
            case nil:
                break
            }
        }
        return result
    }
}
