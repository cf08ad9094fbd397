// SPDX-License-Identifier: Apache-2.0
import Dispatch

extension Duration {
    /// The duration in (fractional) milliseconds.
    var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }

    /// The duration in (fractional) seconds.
    var seconds: Double { milliseconds / 1000 }

    /// For `DispatchQueue.asyncAfter`: whole milliseconds, rounded up (never early).
    var dispatch: DispatchTimeInterval { .milliseconds(Int(milliseconds.rounded(.up))) }
}
