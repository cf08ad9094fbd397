// SPDX-License-Identifier: Apache-2.0
/// Names no one can guess or repeat: store ids, scratch files.
enum RandomName {
    /// 128 random bits in hex (32 digits).
    static func hex() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(generator.next() as UInt64, radix: 16).leftPadded(16) + String(generator.next() as UInt64, radix: 16).leftPadded(16)
    }
}
