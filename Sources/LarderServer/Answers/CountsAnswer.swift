// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// `GET /stores/{id}/counts`' answer, `{"counts": {table: rows}}`, and what
/// a fixture load answers (`{"loaded", "counts"}`): encodings and schemas.
enum CountsAnswer {
    static let object = ContractObject("Counts", OpenAPI.answer([("counts", OpenAPI.counts)]))
    static let loaded = ContractObject("Loaded", OpenAPI.answer([("loaded", OpenAPI.strings), ("counts", OpenAPI.counts)]))

    static func json(_ counts: [(String, Int64)]) -> JSONValue { ["counts": JSONValue(counts: counts)] }

    static func loaded(_ names: [String], counts: [(String, Int64)]) -> JSONValue {
        ["loaded": JSONValue(names), "counts": JSONValue(counts: counts)]
    }
}
