// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

let jsonType = "application/json; charset=utf-8"

func json(_ status: Int, _ value: JSONValue) -> Response {
    Response(status: status, contentType: jsonType, bytes: value.serialized())
}
