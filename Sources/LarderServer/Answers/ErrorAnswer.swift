// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// The contract's error body, `{"error": {"code", "message", "details"}}`:
/// its schema. `LarderError.body` encodes it (the core and the CLI answer
/// the same body); `errorResponse` gives it its status and headers.
enum ErrorAnswer {
    static let object = ContractObject("Error", [
        "type": "object", "required": ["error"],
        "properties": ["error": ["type": "object", "required": ["code", "message", "details"], "properties": [
            "code": ["type": "string", "enum": .array(LarderError.Code.allCases.map { .string($0.rawValue) })],
            "message": OpenAPI.string, "details": ["type": "object"],
        ]]],
    ])
}
