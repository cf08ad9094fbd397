// SPDX-License-Identifier: Apache-2.0
extension LarderClient {
    /// The defaults every Larder client shares, one table for all of them:
    /// `clients/defaults.json` (a test checks these against it).
    public enum Defaults {
        /// The longest silence on one request: twice the server's operation limit.
        /// A request the server holds for a wait gets the wait on top.
        public static let requestTimeout: Duration = .seconds(120)
        /// The server's default wait (a count wait, a store from a build under way).
        public static let waitTimeout: Duration = .seconds(30)
        /// How long `build(key:)` waits in all for another caller's build: the server's build lease.
        public static let buildTimeout: Duration = .seconds(300)
        /// The longest single long poll of that wait.
        public static let buildPoll: Duration = .seconds(30)
        /// The least time a download (artifact, database) is given.
        public static let downloadTimeout: Duration = .seconds(300)
        /// How many times a build's finish is asked while the server answers 409.
        public static let finishAttempts = 5
        /// The pause after a 409 without `Retry-After`, and the longest one a `Retry-After` may ask.
        public static let retryAfterDefault: Duration = .seconds(1)
        public static let retryAfterMax: Duration = .seconds(10)
    }
}
