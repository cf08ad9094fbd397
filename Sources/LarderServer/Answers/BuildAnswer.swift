// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// The contract's build object (`/builds`): its encoding and its OpenAPI
/// schema side by side.
enum BuildAnswer {
    static let schema: JSONValue = ["type": "object", "required": ["key", "state", "label", "links"], "properties": [
        "key": OpenAPI.buildKey, "state": ["type": "string", "enum": ["building", "ready"]], "label": OpenAPI.nullableString,
        "path": ["type": "string", "description": "The builder's file (201 only), under --client-root when set."],
        "started_at": OpenAPI.time, "expires_at": OpenAPI.time, "finished_at": OpenAPI.time, "version": OpenAPI.nullableString,
        "counts": OpenAPI.counts, "size_bytes": OpenAPI.nonNegative,
        "origin": ["type": "string", "enum": ["built", "machine", "fleet"],
                   "description": "A ready build's: finished through this server, found in the cache folder this machine shares, or downloaded from the fleet's bucket."],
        "links": OpenAPI.answer([("self", ["type": "string", "format": "uri"])]),
    ]]

    static let object = ContractObject("Build", schema)
    static let listObject = ContractObject("BuildList", refers: [object], OpenAPI.answer([("builds", ["type": "array", "items": object.ref])]))

    static func list(_ builds: [JSONValue]) -> JSONValue { ["builds": .array(builds)] }

    /// A build under way says where to build (to its claimer) and until when;
    /// a ready one what it holds.
    static func json(_ s: ServerContext, _ info: BuildRegistry.Info) -> JSONValue {
        var members: [(String, JSONValue)] = [("key", .string(info.key)), ("state", .string(info.state.rawValue)), ("label", JSONValue(info.label))]
        if let path = info.path { members.append(("path", .string(s.registry.clientPath(path)))) }
        if let started = info.startedAt { members.append(("started_at", .string(started.rfc3339))) }
        if let expires = info.expiresAt { members.append(("expires_at", .string(expires.rfc3339))) }
        if let finished = info.finishedAt { members.append(("finished_at", .string(finished.rfc3339))) }
        if info.state == .ready {
            members.append(("version", JSONValue(info.version)))
            members.append(("counts", JSONValue(counts: info.counts ?? [])))
            members.append(("size_bytes", .int(info.sizeBytes ?? 0)))
            if let origin = info.origin { members.append(("origin", .string(origin.rawValue))) }
        }
        members.append(("links", ["self": .string(s.base + "/builds/" + info.key)]))
        return .object(members)
    }
}
