// SPDX-License-Identifier: Apache-2.0
// The C library, for every module of the server: the one file that names
// it, so a port to another system starts here and in the seams below.
#if canImport(Glibc)
@_exported import Glibc
#elseif canImport(Darwin)
@_exported import Darwin
#endif
import Synchronization

/// Which system calls the server makes where a Linux call has a portable
/// POSIX stand-in (docs/macos.md lists them): the Linux ones by default,
/// the portable ones with `LARDER_PORTABLE_SYSCALLS=1`, which a second run
/// of the test suite sets so the portable paths are kept working on Linux.
public enum Syscalls {
    private static let switched = Atomic<Bool>(getenv("LARDER_PORTABLE_SYSCALLS").map { String(cString: $0) == "1" } ?? false)

    /// Read once a call by each seam (a call never mixes the two kinds);
    /// a test may set it for the calls that follow.
    public static var portable: Bool {
        get { switched.load(ordering: .relaxed) }
        set { switched.store(newValue, ordering: .relaxed) }
    }

    /// Runs `body` with the switch set to `portable`, then sets it back (a
    /// test of one way or the other, whichever way the run was started).
    public static func forcing<T>(portable: Bool, _ body: () throws -> T) rethrows -> T {
        let was = self.portable
        self.portable = portable
        defer { self.portable = was }
        return try body()
    }
}
