// SPDX-License-Identifier: Apache-2.0
// Entry point only: the commands live in LarderCommand.swift.
LarderCommand.main()
