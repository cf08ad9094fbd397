# Sourced by scripts/package and scripts/portable: copies the licences of
# what a --static-swift-stdlib build links in (the Swift runtime and
# Foundation, swift-argument-parser, swift-log) into the folder $1.
copy_swift_licenses() {
    local into=$1 swift_root package file checkouts
    checkouts=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/checkouts
    mkdir -p "$into"
    swift_root=$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")
    cp "$swift_root/share/swift/LICENSE.txt" "$into/swift.txt"
    for package in swift-argument-parser swift-log; do
        for file in LICENSE.txt NOTICE.txt; do
            if [ -f "$checkouts/$package/$file" ]; then cp "$checkouts/$package/$file" "$into/$package-$file"; fi
        done
    done
    chmod 0644 "$into"/*
}
