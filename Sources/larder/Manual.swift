// SPDX-License-Identifier: Apache-2.0
import LarderCore
import Text

/// What `larder serve --help`, the manual page and the shell completions
/// say about the settings, all from `Configuration.settings` and its groups.
enum Manual {
    static let examples: [(command: String, what: String)] = [
        ("larder serve --fixtures ./fixtures", "the templates in ./fixtures, on http://127.0.0.1:7464"),
        ("LARDER_TOKEN=s3cret larder serve --host 0.0.0.0 --root /var/lib/larder/root",
         "beyond loopback (which needs a token), the stores under /var/lib/larder/root"),
    ]

    static let variables = "Every setting is also a variable: LARDER_ and its name in capitals, - as _ (--ready-copies: LARDER_READY_COPIES); flags win."

    /// The settings in their groups, in the groups' order.
    static var grouped: [(title: String, settings: [Configuration.Setting])] {
        Configuration.groups.map { group in
            (group.title, group.names.compactMap { name in Configuration.settings.first { $0.name == name } })
        }
    }

    /// `larder serve --help`: usage and examples first, then the settings by group.
    static func serveHelp(width: Int = 80) -> String {
        var lines = ["OVERVIEW: Serve the fixtures directory over HTTP (the default command).", "",
                     "USAGE: larder serve [--<setting> <value> ...]", "", "EXAMPLES:"]
        for example in examples {
            lines.append("  " + example.command)
            lines += wrap(example.what, width: width, indent: 6)
        }
        lines.append("")
        lines += wrap(variables, width: width, indent: 0)
        let defaults = Configuration()
        for group in grouped {
            lines += ["", group.title.uppercased() + ":"]
            for setting in group.settings {
                let value = setting.value(in: defaults)
                lines.append("  \(setting.flag)" + (setting.isFlag ? "" : " " + setting.placeholder) + (value.isEmpty ? "" : "  (default \(value))"))
                lines += wrap(setting.help, width: width, indent: 6)
            }
        }
        return lines.joined(separator: "\n")
    }

    static func wrap(_ text: String, width: Int, indent: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, indent + line.count + 1 + word.count > width {
                lines.append(String(repeating: " ", count: indent) + line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(String(repeating: " ", count: indent) + line) }
        return lines
    }
}

// MARK: - Commands and their own options (beside the settings)

extension Manual {
    struct Option {
        var flag: String
        var placeholder: String?
        var help: String
        var choices: [String] = []
        var isPath: Bool { placeholder == "<path>" }
    }

    struct Command {
        var name: String
        var abstract: String
        var takesSettings: Bool
        var options: [Option]
    }

    /// The subcommands and the options each has besides the settings (a
    /// test compares them with each command's own --help).
    static let commands: [Command] = [
        Command(name: "serve", abstract: "Serve the fixtures directory over HTTP (the default command).", takesSettings: true, options: []),
        Command(name: "check", abstract: "Check that every snapshot migrates, keeps its data and matches a fresh build.", takesSettings: false, options: [
            Option(flag: "--fixtures", placeholder: "<path>", help: "The fixtures directory: one sub-folder per template."),
            Option(flag: "--template", placeholder: "<name>", help: "Check only this template."),
            Option(flag: "--junit", placeholder: "<path>", help: "Also write the results as JUnit XML to this file (its folder is made)."),
            Option(flag: "--no-round-trip", placeholder: nil, help: "Skip the round trips of templates with down migrations."),
            Option(flag: "--no-data-check", placeholder: nil, help: "Skip the check that the data a snapshot held is still there."),
        ]),
        Command(name: "health", abstract: "Ask a running server whether it is up: exit 0 when GET /health answers ok.", takesSettings: false, options: [
            Option(flag: "--url", placeholder: "<url>", help: "The server's base URL (http only)."),
            Option(flag: "--timeout", placeholder: "<seconds>", help: "Seconds one attempt may take."),
            Option(flag: "--wait", placeholder: "<seconds>", help: "Keep asking, every 0.1 s, until it answers ok or this many seconds pass."),
        ]),
        Command(name: "warm", abstract: "Build the template cache ahead of time.", takesSettings: true, options: [
            Option(flag: "--template", placeholder: "<name>", help: "Warm only this template."),
        ]),
        Command(name: "up", abstract: "Print the URL of a server for this test run, starting one when none runs.", takesSettings: true, options: [
            Option(flag: "--for", placeholder: "<pid>", help: "A process to serve (repeatable)."),
        ]),
        Command(name: "open", abstract: "Show a store's artifact zip (a file or an s3:// URL) in the browser.", takesSettings: false, options: [
            Option(flag: "--port", placeholder: "<port>", help: "Port to listen on (default: a free one)."),
            Option(flag: "--no-browser", placeholder: nil, help: "Print the URL only; open no browser."),
        ]),
        Command(name: "completions", abstract: "Print the shell completion script for bash, zsh or fish.", takesSettings: false, options: []),
        Command(name: "manual", abstract: "Print the manual page (roff).", takesSettings: false, options: []),
    ]

    /// A command's options: its own, then the settings when it takes them.
    static func options(of command: Command) -> [Option] {
        command.options + (command.takesSettings ? Configuration.settings.map {
            Option(flag: $0.flag, placeholder: $0.isFlag ? nil : $0.placeholder, help: $0.help, choices: $0.choices)
        } : [])
    }

    /// The first sentence of a help text, without what a shell's quoting or zsh's specs would trip on.
    static func short(_ help: String) -> String {
        let sentence = help.split(separator: ";").first.map(String.init) ?? help
        let trimmed = sentence.split(separator: ". ").first.map(String.init) ?? sentence
        let kept = trimmed.filter { !"[]:'\"`\\$".contains($0) }.drop { $0 == "." || $0 == " " }
        return String(kept.reversed().drop { $0 == "." || $0 == " " }.reversed())
    }
}

// MARK: - Shell completions

extension Manual {
    static func completion(shell: String) -> String? {
        switch shell {
        case "bash": return bash()
        case "zsh": return zsh()
        case "fish": return fish()
        default: return nil
        }
    }

    static func bash() -> String {
        var lines = [
            "# bash completion for larder: `larder completions bash` wrote it, from the settings table.",
            "_larder() {",
            "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} command=${COMP_WORDS[1]}",
            "    if [[ $COMP_CWORD -eq 1 && $cur != -* ]]; then",
            "        COMPREPLY=($(compgen -W \"\(commands.map(\.name).joined(separator: " "))\" -- \"$cur\")); return",
            "    fi",
            "    [[ $command == -* || $COMP_CWORD -eq 1 ]] && command=serve",
            "    case $prev in",
        ]
        let all = commands.flatMap(options(of:))
        let paths = Set(all.filter(\.isPath).map(\.flag)).sorted()
        if !paths.isEmpty { lines.append("        \(paths.joined(separator: "|"))) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;") }
        var seen = Set<String>()
        for option in all where !option.choices.isEmpty && seen.insert(option.flag).inserted {
            lines.append("        \(option.flag)) COMPREPLY=($(compgen -W \"\(option.choices.joined(separator: " "))\" -- \"$cur\")); return ;;")
        }
        lines += ["    esac", "    case $command in"]
        for command in commands {
            let words = options(of: command).map(\.flag) + (command.name == "completions" ? ["bash", "zsh", "fish"] : []) + ["--help"]
            lines.append("        \(command.name)) COMPREPLY=($(compgen -W \"\(words.joined(separator: " "))\" -- \"$cur\")) ;;")
        }
        lines += ["    esac", "}",
                  "complete -o default -F _larder larder", ""]
        return lines.joined(separator: "\n")
    }

    static func zsh() -> String {
        var lines = ["#compdef larder", "# zsh completion for larder: `larder completions zsh` wrote it, from the settings table.", "_larder() {",
                     "    local -a commands", "    commands=("]
        for command in commands { lines.append("        '\(command.name):\(short(command.abstract))'") }
        lines += ["    )", "    if (( CURRENT == 2 )) && [[ $words[2] != -* ]]; then", "        _describe command commands; return", "    fi",
                  "    local command=$words[2]",
                  "    if [[ $command == -* ]]; then command=serve; else shift words; (( CURRENT-- )); fi", "    case $command in"]
        for command in commands {
            var specs = options(of: command).map { option -> String in
                let value: String
                if option.placeholder == nil {
                    value = ""
                } else if !option.choices.isEmpty {
                    value = ":value:(\(option.choices.joined(separator: " ")))"
                } else {
                    value = option.isPath ? ":path:_files" : ":value: "
                }
                return "'\(option.flag)[\(short(option.help))]\(value)'"
            }
            if command.name == "completions" { specs.append("':shell:(bash zsh fish)'") }
            lines.append("        \(command.name)) _arguments -s \(specs.isEmpty ? "''" : specs.joined(separator: " \\\n            ")) ;;")
        }
        lines += ["    esac", "}", "_larder \"$@\"", ""]
        return lines.joined(separator: "\n")
    }

    static func fish() -> String {
        var lines = ["# fish completion for larder: `larder completions fish` wrote it, from the settings table.",
                     "complete -c larder -f"]
        for command in commands {
            lines.append("complete -c larder -n __fish_use_subcommand -a \(command.name) -d '\(short(command.abstract))'")
        }
        for command in commands {
            for option in options(of: command) {
                var line = "complete -c larder -n '__fish_seen_subcommand_from \(command.name)' -l \(option.flag.dropFirst(2))"
                if option.placeholder != nil { line += option.isPath ? " -r -F" : " -x" }
                if !option.choices.isEmpty { line += " -a '\(option.choices.joined(separator: " "))'" }
                lines.append(line + " -d '\(short(option.help))'")
            }
        }
        lines.append("complete -c larder -n '__fish_seen_subcommand_from completions' -a 'bash zsh fish'")
        return lines.joined(separator: "\n") + "\n"
    }
}

// MARK: - The manual page

extension Manual {
    /// `larder.1`, in man(7) roff.
    static func roff(version: String) -> String {
        func text(_ s: String) -> String {
            var escaped = s.replacing("\\", with: "\\e").replacing("-", with: "\\-")
            if escaped.hasPrefix(".") || escaped.hasPrefix("'") { escaped = "\\&" + escaped }
            return escaped
        }
        var lines = [
            ".TH LARDER 1 \"\" \"larder \(version)\" \"User Commands\"",
            ".SH NAME", "larder \\- throwaway SQLite databases for test suites, over HTTP",
            ".SH SYNOPSIS",
        ]
        for command in commands {
            lines.append(".B larder \(command.name)")
            let own = command.options.map { option in
                option.placeholder.map { "[\\fB\(text(option.flag))\\fR \\fI\(text($0))\\fR]" } ?? "[\\fB\(text(option.flag))\\fR]"
            }
            let arguments = own + (command.takesSettings ? ["[\\fB\\-\\-\\fIsetting value\\fR ...]"] : [])
                + (command.name == "completions" ? ["\\fIbash\\fR|\\fIzsh\\fR|\\fIfish\\fR"] : [])
            if !arguments.isEmpty { lines.append(arguments.joined(separator: " ")) }
            lines.append(".br")
        }
        lines += [".SH DESCRIPTION",
                  text("Larder hands every test its own throwaway SQLite database over HTTP, copied from a template built once per schema version and fixture set. It loads fixtures, runs migrations in the formats teams already keep, answers counts, schema and sandboxed queries, streams a failed test's database as a zip, and checks that saved old databases still migrate."),
                  ".SH COMMANDS"]
        for command in commands {
            lines += [".TP", ".B \(command.name)", text(command.abstract)]
            for option in command.options {
                lines += [".RS", ".TP", "\\fB\(text(option.flag))\\fR" + (option.placeholder.map { " \\fI\(text($0))\\fR" } ?? ""), text(option.help), ".RE"]
            }
        }
        lines += [".SH SETTINGS", text("serve, warm and up take these. " + variables)]
        let defaults = Configuration()
        for group in grouped {
            lines.append(".SS \(text(group.title))")
            for setting in group.settings {
                let value = setting.value(in: defaults)
                lines += [".TP", "\\fB\(text(setting.flag))\\fR" + (setting.isFlag ? "" : " \\fI\(text(setting.placeholder))\\fR"),
                          text(setting.help + (value.isEmpty ? "" : " Default: \(value).") + " Variable: \(setting.environmentVariable).")]
            }
        }
        lines.append(".SH EXAMPLES")
        for example in examples { lines += [".TP", ".B \(text(example.command))", text(example.what)] }
        lines += [".SH EXIT STATUS",
                  text("serve: 0 when stopped by a signal, 2 when it cannot start, 64 for a bad setting. check: 0 when every check passes, 1 when one fails, 2 when it cannot check. health: 0 when the server answers ok, 1 otherwise."),
                  ".SH SEE ALSO", text("docs/api.md of the Larder repository, and GET /openapi.json of a running server, describe the HTTP API."), ""]
        return lines.joined(separator: "\n")
    }
}
