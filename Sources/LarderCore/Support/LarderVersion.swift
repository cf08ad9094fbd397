// SPDX-License-Identifier: Apache-2.0
import SQLite

/// The version of Larder, reported by `larder --version`, `/health` and manifests.
public enum LarderVersion {
    public static let current = "0.1.0"
    /// The SQLite library Larder runs on.
    public static var sqlite: String { Connection.libraryVersion }
}
