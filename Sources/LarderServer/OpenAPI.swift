import LarderCore

/// The OpenAPI 3.1 description served at `/openapi.json`, built from one
/// table of operations so it stays in step with the routes (a test checks).
enum OpenAPI {
    struct Operation {
        let method: String
        let path: String
        let summary: String
        let success: Int
        let errors: [Int]
        var body: String? = nil
        var query: [(String, String)] = []
        var contentType = "application/json"
    }

    static let operations: [Operation] = [
        Operation(method: "get", path: "/health", summary: "Liveness and versions", success: 200, errors: []),
        Operation(method: "get", path: "/metrics", summary: "Prometheus metrics", success: 200, errors: [401], contentType: "text/plain"),
        Operation(method: "get", path: "/openapi.json", summary: "This document", success: 200, errors: []),
        Operation(method: "get", path: "/", summary: "HTML dashboard", success: 200, errors: [401], contentType: "text/html"),
        Operation(method: "get", path: "/templates", summary: "Every template of the fixtures directory", success: 200, errors: [401]),
        Operation(method: "get", path: "/templates/{name}", summary: "One template with its migrations", success: 200, errors: [401, 404]),
        Operation(method: "get", path: "/stores", summary: "Live stores, newest first", success: 200, errors: [400, 401],
                  query: [("label", "string"), ("template", "string"), ("limit", "integer"), ("cursor", "string")]),
        Operation(method: "post", path: "/stores", summary: "Create a store (JSON body, or a raw upload as application/vnd.sqlite3)", success: 201,
                  errors: [400, 401, 404, 413, 415, 422, 429], body: "CreateStore",
                  query: [("template", "string"), ("version", "string"), ("label", "string"), ("ttl_seconds", "integer")]),
        Operation(method: "get", path: "/stores/{id}", summary: "One store", success: 200, errors: [401, 404]),
        Operation(method: "patch", path: "/stores/{id}", summary: "Keep, relabel or extend a store", success: 200, errors: [400, 401, 404], body: "PatchStore"),
        Operation(method: "delete", path: "/stores/{id}", summary: "Remove a store and its files", success: 204, errors: [401, 404, 409]),
        Operation(method: "post", path: "/stores/{id}/fixtures", summary: "Load fixtures, SQL or rows, all or nothing", success: 200,
                  errors: [400, 401, 404, 409, 422], body: "LoadFixtures"),
        Operation(method: "post", path: "/stores/{id}/migrate", summary: "Migrate to a version", success: 200, errors: [400, 401, 404, 409, 422], body: "Migrate"),
        Operation(method: "get", path: "/stores/{id}/migrations", summary: "Applied and pending migrations", success: 200, errors: [400, 401, 404]),
        Operation(method: "get", path: "/stores/{id}/counts", summary: "Row counts; with wait=, a long poll", success: 200, errors: [400, 401, 404, 408],
                  query: [("tables", "string"), ("wait", "string"), ("timeout_ms", "integer")]),
        Operation(method: "get", path: "/stores/{id}/schema", summary: "Tables, columns, indexes, foreign keys, views, triggers", success: 200, errors: [401, 404]),
        Operation(method: "post", path: "/stores/{id}/query", summary: "One sandboxed SQL statement", success: 200, errors: [400, 401, 403, 404, 408, 409, 422], body: "Query"),
        Operation(method: "get", path: "/stores/{id}/artifact", summary: "The store as a streamed zip with a manifest", success: 200, errors: [400, 401, 404],
                  query: [("compression", "string")], contentType: "application/zip"),
        Operation(method: "get", path: "/stores/{id}/database", summary: "A consistent snapshot of the database", success: 200, errors: [401, 404],
                  contentType: "application/vnd.sqlite3"),
        Operation(method: "get", path: "/checks/migrations", summary: "Migration fixture health checks", success: 200, errors: [400, 401, 404, 422],
                  query: [("template", "string"), ("format", "string")]),
    ]

    static func schema(_ properties: [(String, JSONValue)]) -> JSONValue {
        ["type": "object", "additionalProperties": false, "properties": .object(properties)]
    }

    static let string: JSONValue = ["type": "string"]
    static let nullableString: JSONValue = ["type": ["string", "null"]]
    static let integer: JSONValue = ["type": "integer"]
    static let strings: JSONValue = ["type": "array", "items": ["type": "string"]]

    static let document: JSONValue = {
        var paths: [(String, [(String, JSONValue)])] = []
        for op in operations {
            let bodyType: JSONValue = .string(op.contentType == "application/json" ? "object" : "string")
            let media: JSONValue = ["schema": ["type": bodyType]]
            var responses: [(String, JSONValue)] = [(String(op.success), ["description": "Success", "content": .object([(op.contentType, media)])])]
            if op.success == 204 { responses = [("204", ["description": "Deleted"])] }
            for code in op.errors {
                responses.append((String(code), ["description": "Error", "content": ["application/json": ["schema": ["$ref": "#/components/schemas/Error"]]]]))
            }
            var parameters: [JSONValue] = []
            for segment in op.path.split(separator: "/") where segment.hasPrefix("{") {
                parameters.append(["name": .string(String(segment.dropFirst().dropLast())), "in": "path", "required": true, "schema": string])
            }
            for (name, type) in op.query {
                parameters.append(["name": .string(name), "in": "query", "required": false, "schema": ["type": .string(type)]])
            }
            var operation: [(String, JSONValue)] = [("summary", .string(op.summary)), ("operationId", .string(op.method + op.path.replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "{", with: "").replacingOccurrences(of: "}", with: "").replacingOccurrences(of: ".", with: "_"))), ("responses", .object(responses))]
            if !parameters.isEmpty { operation.append(("parameters", .array(parameters))) }
            if let body = op.body {
                let reference: JSONValue = ["$ref": .string("#/components/schemas/\(body)")]
                var content: [(String, JSONValue)] = [("application/json", ["schema": reference])]
                if op.path == "/stores" { content.append(("application/vnd.sqlite3", ["schema": ["type": "string", "format": "binary"]])) }
                operation.append(("requestBody", ["required": false, "content": .object(content)]))
            }
            if let i = paths.firstIndex(where: { $0.0 == op.path }) { paths[i].1.append((op.method, .object(operation))) } else { paths.append((op.path, [(op.method, .object(operation))])) }
        }
        let schemas: JSONValue = [
            "Error": ["type": "object", "required": ["error"], "properties": ["error": ["type": "object", "required": ["code", "message", "details"],
                      "properties": ["code": ["type": "string", "enum": .array(LarderError.Code.allCases.map { .string($0.rawValue) })], "message": string, "details": ["type": "object"]]]]],
            "CreateStore": schema([("template", nullableString), ("version", nullableString), ("snapshot", nullableString), ("fixtures", strings),
                                   ("label", nullableString), ("ttl_seconds", integer)]),
            "PatchStore": schema([("keep", ["type": "boolean"]), ("ttl_seconds", integer), ("label", nullableString)]),
            "LoadFixtures": schema([("fixtures", strings), ("sql", string), ("rows", ["type": "object"])]),
            "Migrate": schema([("to", string)]),
            "Query": schema([("sql", string), ("params", ["type": ["array", "object", "null"]]), ("max_rows", integer), ("timeout_ms", integer)]),
        ]
        return [
            "openapi": "3.1.0",
            "info": ["title": "Larder", "version": .string(LarderVersion.current),
                     "description": "Isolated throwaway SQLite stores for test suites, over HTTP."],
            "paths": .object(paths.map { ($0.0, .object($0.1)) }),
            "components": ["schemas": schemas, "securitySchemes": ["bearer": ["type": "http", "scheme": "bearer"]]],
        ]
    }()
}
