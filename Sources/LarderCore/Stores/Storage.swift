// SPDX-License-Identifier: Apache-2.0
import FileSystem

/// The file system under the root, as `GET /health` and the dashboard tell
/// it: whether a store's copy (a hand-out, a ready copy, a fork, a base, a
/// snapshot's copy) shares its blocks with what it copies, so that it takes
/// no room and no time whatever the size, or is a copy of every byte.
public struct Storage: Sendable {
    /// "ext4", "xfs", "btrfs", "tmpfs", ... (nil: not known, the portable path).
    public let fileSystem: String?
    /// Copies from the template cache into the root and within the root
    /// share blocks (XFS with reflink, btrfs, ...), as asked of the file
    /// system once at start.
    public let sharesBlocks: Bool

    public init(fileSystem: String?, sharesBlocks: Bool) {
        self.fileSystem = fileSystem
        self.sharesBlocks = sharesBlocks
    }

    init(layout: RootLayout, cacheDirectory: String?) {
        let cache = cacheDirectory.flatMap { FileSystem.isDirectory($0) ? $0 : nil } ?? layout.cache
        self.init(fileSystem: FileSystem.typeName(layout.stores),
                  sharesBlocks: FileSystem.sharesBlocks(from: layout.building, into: layout.temporary)
                      && FileSystem.sharesBlocks(from: cache, into: layout.building))
    }
}
