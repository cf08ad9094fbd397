// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// A named object of the contract, a request body or an answer: its name
/// among the OpenAPI document's components and its JSON schema. Some
/// schemas state the configuration's limits (`--query-row-limit`, say).
struct ContractObject: Sendable {
    let name: String
    let schema: @Sendable (Configuration) -> JSONValue
    /// The objects its schema names by `$ref` (a list's items).
    let refers: [ContractObject]

    init(_ name: String, refers: [ContractObject] = [], _ schema: JSONValue) {
        self.init(name, refers: refers) { _ in schema }
    }

    init(_ name: String, refers: [ContractObject] = [], schema: @escaping @Sendable (Configuration) -> JSONValue) {
        self.name = name
        self.schema = schema
        self.refers = refers
    }

    /// `{"$ref": …}` to this object.
    var ref: JSONValue { OpenAPI.ref(name) }
}

/// One query parameter: its name and its JSON schema.
struct Parameter {
    let name: String
    let schema: JSONValue
    var description: String? = nil
}

/// One operation of the contract, `METHOD /path`: what the router needs of
/// it (its handler, its query names, whether it needs the token) and what
/// the OpenAPI document says of it, in one entry of the route table.
struct Operation {
    let method: String
    let path: String
    let handler: RouteHandler
    let summary: String
    /// Where its handler's work runs.
    var lane: Lane = .requestThread
    /// Answers without the token: the health check, the browser's way in and out.
    var open = false
    var success = 200
    /// More success statuses, with the same answer (`POST /builds`: 201, 202 and 200).
    var moreSuccesses: [Int] = []
    /// Error statuses this operation can answer besides those every
    /// operation can (see `OpenAPI.commonErrors`).
    var errors: [Int] = []
    /// Error statuses that carry the success answer (a failed check's report).
    var failuresAnswer: [Int] = []
    /// Whether a 401 is the HTML sign-in form rather than the error body
    /// (a browser's page): the router answers so, and the document says so.
    var signInForm = false
    var body: BodyFields? = nil
    var bodyType = "application/json"
    /// Other media types the body may have, taken as they are (a raw upload).
    var rawBodyTypes: [String] = []
    /// Whether a request without a body is refused (400).
    var bodyRequired = false
    var query: [Parameter] = []
    /// Query names taken but left out of the document: a raw upload's
    /// (OpenAPI cannot tie parameters to one of a body's media types).
    var undocumentedQuery: Set<String> = []
    var contentType = "application/json"
    /// Another media type the success answer may have (`?format=junit`).
    var alternateType: String? = nil
    var answer: ContractObject? = nil
    var description: String? = nil

    /// Every status it may answer: its successes, its errors, those every
    /// operation may (`OpenAPI.commonErrors`), and 499 for a client that left.
    var statuses: Set<Int> { Set([success, 499] + moreSuccesses + errors + failuresAnswer + OpenAPI.commonErrors(self)) }

    /// Every query name the router lets through to the handler.
    var queryNames: Set<String> { Set(query.map(\.name)).union(undocumentedQuery) }
}

/// Where an operation's work runs: on the request thread (libmicrohttpd's,
/// which every other request shares) or on the workers.
enum Lane: Sendable, Equatable {
    /// Fast work only: the handler answers at once (`Outcome.now`) or
    /// registers a callback (`.whenReady`); `.later` work is refused.
    case requestThread
    /// The handler's `.later` work runs on the workers, after the work of
    /// its line ahead of it; a handler may still answer at once when the
    /// work proves fast (a cached copy with nothing to sync).
    case workers(Line)

    /// Whose work waits in one line, so that one store's slow work never holds every worker.
    enum Line: Sendable, Equatable {
        case none
        /// The store `{id}` names.
        case store
        /// The build `{key}` names.
        case build

        /// The path parameter that names the line.
        var parameter: String? {
            switch self {
            case .none: nil
            case .store: "id"
            case .build: "key"
            }
        }
    }
}
