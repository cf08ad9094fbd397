// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

let jsonType = "application/json; charset=utf-8"

func json(_ status: Int, _ value: JSONValue) -> Response {
    json(status, serialized: value.serialized())
}

/// A JSON answer already written (`JSONWriter`).
func json(_ status: Int, serialized bytes: [UInt8]) -> Response {
    Response(status: status, contentType: jsonType, bytes: bytes)
}
