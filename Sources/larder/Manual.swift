// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// What `larder serve --help`, the manual page and the shell completions
/// say about the settings, all from `Configuration.settings` and its groups.
enum Manual {
    static let examples: [(command: String, what: String)] = [
        ("larder serve --fixtures ./fixtures", "the templates in ./fixtures, on http://127.0.0.1:7464"),
        ("LARDER_TOKEN=s3cret larder serve --host 0.0.0.0 --root /var/lib/larder/root",
         "beyond loopback (which needs a token), the stores under /var/lib/larder/root"),
    ]

    static let variables = "Every setting is also a variable: LARDER_ and its name in capitals, - as _ (--pool-size: LARDER_POOL_SIZE); flags win."

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
                lines.append("  \(setting.flag) \(setting.placeholder)" + (value.isEmpty ? "" : "  (default \(value))"))
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
