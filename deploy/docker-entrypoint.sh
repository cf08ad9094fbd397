#!/bin/sh
# The image's entrypoint: runs `larder ARGS` as the user larder. Started as
# root (the default), it first gives larder the state directory and the
# root when they are not its own yet: a host path or a volume that Docker
# made belongs to root. `docker run --user UID` skips all of this.
set -e
if [ "$(id -u)" = 0 ]; then
    root=${LARDER_ROOT:-/var/lib/larder/root}
    state=$(dirname "$root")
    mkdir -p "$state"
    for directory in "$state" "$root"; do
        if [ -d "$directory" ] && [ "$(stat -c %U "$directory")" != larder ]; then
            chown larder:larder "$directory"
        fi
    done
    exec setpriv --reuid=larder --regid=larder --init-groups -- larder "$@"
fi
exec larder "$@"
