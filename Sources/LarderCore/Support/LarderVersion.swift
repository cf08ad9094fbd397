/// The version of Larder, reported by `larder --version`, `/health` and manifests.
public enum LarderVersion {
    public static let current = "0.1.0"
}
