// Entry point only: the commands live in LarderCommand.swift.
LarderCommand.main()
