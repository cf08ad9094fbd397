// SPDX-License-Identifier: Apache-2.0
/// Migration versions compared part by part as numbers: 1 < 1.1 < 2 < 10,
/// and 20240613061102 > 9 (no overflow: digits are compared as text).
public enum VersionOrder {
    public static func less(_ a: String, _ b: String) -> Bool {
        compare(a, b) < 0
    }

    public static func compare(_ a: String, _ b: String) -> Int {
        let pa = a.split(separator: ".", omittingEmptySubsequences: false)
        let pb = b.split(separator: ".", omittingEmptySubsequences: false)
        for i in 0..<max(pa.count, pb.count) {
            let x = i < pa.count ? normalized(pa[i]) : "0"
            let y = i < pb.count ? normalized(pb[i]) : "0"
            if x.count != y.count { return x.count < y.count ? -1 : 1 }
            if x != y { return x < y ? -1 : 1 }
        }
        return 0
    }

    /// Digits without leading zeros ("0007" is "7").
    public static func normalized<S: StringProtocol>(_ part: S) -> String {
        let trimmed = part.drop(while: { $0 == "0" })
        return trimmed.isEmpty ? "0" : String(trimmed)
    }

    /// A version as written in a file name, canonical: "0003" → "3", "1_1" → "1.1".
    public static func canonical(_ text: String) -> String {
        text.replacing("_", with: ".").split(separator: ".").map { normalized($0) }.joined(separator: ".")
    }
}
