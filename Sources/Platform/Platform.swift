// SPDX-License-Identifier: Apache-2.0
// The C library, for every module of the server: the one file that names
// it, so a port to another system starts here.
#if canImport(Glibc)
@_exported import Glibc
#elseif canImport(Darwin)
@_exported import Darwin
#endif
