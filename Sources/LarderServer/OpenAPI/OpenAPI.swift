// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// The OpenAPI 3.1 description served at `/openapi.json`, assembled from
/// the route table (`Routes.table`) and the contract objects its entries
/// name (`Answers/`, `RequestBody`), so it stays in step with the routes.
///
/// The schemas state the limits the server enforces (ranges, enums, which
/// fields may be null, which combinations are refused) so that a generator
/// such as schemathesis sends nothing the document allows and the server
/// refuses, or the other way round.
enum OpenAPI {
    /// Statuses any operation can answer: a query name it does not take
    /// (400), a foreign `Origin` or `Host` (403 `forbidden`), a bug (500),
    /// shutting down (503), a full file system (507: a body spooled, or a
    /// store's `-shm` made to read it); and, on every route but the open
    /// ones (the health check, signing in and out), a missing token (401).
    static func commonErrors(_ op: Operation) -> [Int] {
        (op.open ? [] : [401]) + [400, 403, 500, 503, 507]
    }

    /// One count condition of `wait`: a table, an operator, a whole number.
    static let condition = " *[A-Za-z_][A-Za-z0-9_]* *(>=|<=|>|<|==?) *-?[0-9]{1,18} *"

    /// A request object: only the listed members.
    static func object(_ properties: [(String, JSONValue)], required: [String] = [], extra: [(String, JSONValue)] = []) -> JSONValue {
        var members: [(String, JSONValue)] = [("type", "object"), ("additionalProperties", false), ("properties", .object(properties))]
        if !required.isEmpty { members.append(("required", JSONValue(required))) }
        return .object(members + extra)
    }

    /// A response object: the listed members are required, more may come.
    static func answer(_ properties: [(String, JSONValue)]) -> JSONValue {
        ["type": "object", "required": JSONValue(properties.map(\.0)), "properties": .object(properties)]
    }

    static let string: JSONValue = ["type": "string"]
    /// SQL: any text but a NUL character (SQLite would stop reading there; a 400).
    static let noNUL: JSONValue = "^[^\\u0000]*$"
    static let sql: JSONValue = ["type": "string", "pattern": noNUL]
    static let nullableString: JSONValue = ["type": ["string", "null"]]
    /// At most 256 bytes of UTF-8: 256 characters at most, fewer where they take more than a byte.
    static let label: JSONValue = ["type": ["string", "null"], "maxLength": 256]
    static let boolean: JSONValue = ["type": "boolean"]
    static let strings: JSONValue = ["type": "array", "items": ["type": "string"]]
    static let time: JSONValue = ["type": "string", "format": "date-time"]
    static let counts: JSONValue = ["type": "object", "additionalProperties": ["type": "integer", "minimum": 0]]
    /// What the catalog takes as a template name (no path tricks).
    static let templatePattern: JSONValue = "^[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}$"
    static let templateName: JSONValue = ["type": "string", "pattern": templatePattern]
    static let storeID: JSONValue = ["type": "string", "pattern": "^[A-Za-z0-9_-]+$"]
    static let buildKey: JSONValue = ["type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$"]
    static let nonNegative: JSONValue = ["type": "integer", "minimum": 0]
    static func ref(_ name: String) -> JSONValue { ["$ref": .string("#/components/schemas/\(name)")] }

    static func operationID(_ op: Operation) -> String {
        op.method.lowercased() + op.path.replacing("/", with: "_").replacing("{", with: "")
            .replacing("}", with: "").replacing(".", with: "_")
    }

    static func responses(_ op: Operation) -> [(String, JSONValue)] {
        let error: JSONValue = ["description": "Error", "content": ["application/json": ["schema": ErrorAnswer.object.ref]]]
        let schema: JSONValue = op.contentType == "application/json" ? (op.answer?.ref ?? ["type": "object"])
            : (op.contentType.hasPrefix("text/") ? ["type": "string"] : ["type": "string", "format": "binary"])
        var success: [(String, JSONValue)] = [(op.contentType, ["schema": schema])]
        if let other = op.alternateType { success.append((other, ["schema": ["type": "string"]])) }
        let deleted: JSONValue = ["description": "Deleted"], done: JSONValue = ["description": "Success", "content": .object(success)]
        let seeOther: JSONValue = ["description": "See Other: to the dashboard", "headers": ["Location": ["schema": string]]]
        var responses: [(String, JSONValue)] = [(String(op.success), op.success == 204 ? deleted : op.success == 303 ? seeOther : done)]
        responses += op.moreSuccesses.map { (String($0), done) }
        for code in Set(op.errors + commonErrors(op)).sorted() {
            responses.append((String(code), op.failuresAnswer.contains(code) ? ["description": "Failed, with the same answer", "content": .object(success)]
                : code == 401 && op.signInForm ? ["description": "The sign-in form", "content": ["text/html": ["schema": ["type": "string"]]]] : error))
        }
        return responses
    }

    static func operation(_ op: Operation) -> JSONValue {
        var parameters: [JSONValue] = []
        for segment in op.path.split(separator: "/") where segment.hasPrefix("{") {
            let name = String(segment.dropFirst().dropLast())
            parameters.append(["name": .string(name), "in": "path", "required": true, "schema": name == "id" ? storeID : name == "key" ? buildKey : templateName])
        }
        for p in op.query {
            var parameter: [(String, JSONValue)] = [("name", .string(p.name)), ("in", "query"), ("required", false), ("schema", p.schema)]
            if let d = p.description { parameter.append(("description", .string(d))) }
            parameters.append(.object(parameter))
        }
        var operation: [(String, JSONValue)] = [("summary", .string(op.summary)), ("operationId", .string(operationID(op)))]
        if let d = op.description { operation.append(("description", .string(d))) }
        operation.append(("responses", .object(responses(op))))
        if !parameters.isEmpty { operation.append(("parameters", .array(parameters))) }
        let raw = op.rawBodyTypes.map { ($0, ["schema": ["type": "string", "format": "binary"]] as JSONValue) }
        if op.body != nil || !raw.isEmpty {
            let content = (op.body.map { [(op.bodyType, ["schema": $0.contract.ref] as JSONValue)] } ?? []) + raw
            operation.append(("requestBody", ["required": .bool(op.bodyRequired), "content": .object(content)]))
        }
        return .object(operation)
    }

    /// The document for a server with this configuration.
    static func document(for configuration: Configuration) -> JSONValue {
        let table = Routes.table(configuration)
        var paths: [(String, [(String, JSONValue)])] = []
        for op in table {
            let item = (op.method.lowercased(), operation(op))
            if let i = paths.firstIndex(where: { $0.0 == op.path }) { paths[i].1.append(item) } else { paths.append((op.path, [item])) }
        }
        // Every object an operation names, and those they name, once each.
        var components: [(String, JSONValue)] = []
        func add(_ object: ContractObject) {
            guard !components.contains(where: { $0.0 == object.name }) else { return }
            components.append((object.name, object.schema(configuration)))
            object.refers.forEach(add)
        }
        add(ErrorAnswer.object)
        for op in table { [op.body?.contract, op.answer].compactMap { $0 }.forEach(add) }
        return [
            "openapi": "3.1.0",
            "info": ["title": "Larder", "version": .string(LarderVersion.current),
                     "description": "Isolated throwaway SQLite stores for test suites, over HTTP."],
            "paths": .object(paths.map { ($0.0, .object($0.1)) }),
            "components": ["schemas": .object(components), "securitySchemes": ["bearer": ["type": "http", "scheme": "bearer"]]],
        ]
    }

    /// The document for the default configuration.
    static let document = document(for: Configuration())
}
