# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash disable=SC2034 # variables are for the sourcing script
#
# kernel/common.sh: what build-kernel and check-series share. Sourced, not
# run. The caller sets `here` (this directory), `cache` (TUCK_CACHE_DIR)
# and defines log MESSAGE and die MESSAGE before calling anything here.
#
# Source trees under $cache/kernel/src/:
#   pristine/   the tarball, extracted once per tarball (minutes of xz);
#   tree-KEY/   the pristine tree hard-linked (cp -al, seconds) with a
#               series applied; KEY hashes the source and the series, so
#               the release/debug series and tests/kernel's broken one each
#               have a tree and never overwrite each other's.
# patch(1) replaces the files it changes instead of writing through the
# link, so a tree never alters the pristine copy; make with O= writes only
# into its object directory.
#
# Object directories live inside their tree (TREE/.o-NAME): kbuild then
# names the source tree "..", every path on a compiler command line is
# relative, and ccache finds the same object whichever tree compiled it.
# That is how the broken kernel, check-series and the release build share
# their compiles.

# Config fragments per variant, merged in this order on top of allnoconfig.
declare -A variant_fragments=(
        [release]="base systemd images release"
        [debug]="base suite debug"
)

tarball=${TUCK_KERNEL_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
jobs=${TUCK_KERNEL_JOBS:-$(nproc)}
patchdir=${TUCK_KERNEL_PATCHDIR:-$here/patches}
configdir=${TUCK_KERNEL_CONFIGDIR:-$here/config}
kcache="${cache:?}/kernel"

sha256() { sha256sum "$@" | cut -d' ' -f1; }

# The patches named by the series file, in order (quilt syntax: comments
# and blank lines ignored, one patch per line, no options supported).
series_patches() {
        local line
        while IFS= read -r line; do
                line=${line%%#*}
                line=${line//[[:space:]]/}
                [[ -z $line ]] || echo "$line"
        done <"$patchdir/series"
}

# Sets pkg, pkgver and tarsum, and patches (the series), or dies naming
# what is missing.
load_inputs() {
        [[ -r $tarball ]] || die "kernel source '$tarball' not found: install linux-source-6.1 (tools/setup does)"
        [[ -r $patchdir/series ]] || die "series file '$patchdir/series' not found"
        pkg=$(dpkg-query -S "$tarball" 2>/dev/null | cut -d: -f1 || true)
        if [[ -n $pkg ]]; then
                pkgver=$(dpkg-query -W -f='${Version}' "$pkg")
        else
                pkg=unpackaged pkgver=unknown
        fi
        tarsum=$(sha256 "$tarball")
        mapfile -t patches < <(series_patches)
        ((${#patches[@]} > 0)) || die "series file '$patchdir/series' lists no patches"
        local p
        for p in "${patches[@]}"; do
                [[ -r $patchdir/$p ]] || die "patch '$p' listed in the series does not exist in $patchdir"
        done
}

# The lines of a cache key that name the source: package, tarball, series.
source_manifest() {
        echo "source-package $pkg $pkgver"
        echo "tarball $(basename "$tarball") $tarsum"
        echo "series $(sha256 "$patchdir/series")"
        local p
        for p in "${patches[@]}"; do
                echo "patch $p $(sha256 "$patchdir/$p")"
        done
}

toolchain_manifest() {
        echo "common $(sha256 "$here/common.sh")"
        echo "cc $(gcc --version | head -n1)"
        echo "ld $(ld --version | head -n1)"
}

# One kernel compile at a time on the machine: build-kernel and
# check-series wait here for each other.
take_lock() {
        mkdir -p "$kcache"
        exec {lockfd}>"$kcache/.lock"
        if ! flock -n "$lockfd"; then
                log "another kernel build is running; waiting for it"
                flock "$lockfd"
        fi
}

makefile_version() {
        awk -F' = ' '/^VERSION =/{v=$2} /^PATCHLEVEL =/{p=$2} /^SUBLEVEL =/{s=$2}
                     /^EXTRAVERSION =/{e=$2; print v "." p "." s e; exit}' "$1/Makefile"
}

# $kcache/src/pristine: the unpatched tarball, extracted once. Sets kver.
prepare_pristine() {
        local pristine="$kcache/src/pristine" stamp top
        stamp="$pkg $pkgver $(basename "$tarball") $tarsum"
        if [[ ! -f $pristine/.tuck-pristine || $(<"$pristine/.tuck-pristine") != "$stamp" ]]; then
                local tmp="$kcache/src/.pristine.tmp"
                log "extracting $(basename "$tarball") ($pkg $pkgver)"
                rm -rf "$tmp" && mkdir -p "$tmp"
                tar -C "$tmp" -xf "$tarball"
                top=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -n1)
                [[ -n $top && -f $top/Makefile ]] || { rm -rf "$tmp"; die "'$tarball' does not contain a kernel tree"; }
                echo "$stamp" >"$top/.tuck-pristine"
                rm -rf "$pristine"
                mv "$top" "$pristine"
                rm -rf "$tmp"
        fi
        kver=$(makefile_version "$pristine")
}

# Hard-link the pristine tree to DIR (which must not exist).
link_pristine() {
        cp -al "$kcache/src/pristine" "$1"
        rm -f "$1/.tuck-pristine"
}

# Apply patch P (a name in $patchdir) to TREE without fuzz; on failure
# print patch's complaint and return 1, leaving TREE as it was.
apply_patch() {
        local tree=$1 p=$2 out
        if ! out=$(patch -d "$tree" -p1 -N --dry-run --fuzz=0 -s <"$patchdir/$p" 2>&1); then
                echo "$out" >&2
                return 1
        fi
        patch -d "$tree" -p1 -N --fuzz=0 -s --no-backup-if-mismatch <"$patchdir/$p" >/dev/null
}

# Sets tree to $kcache/src/tree-KEY with the whole series applied, making
# it if needed; dies naming the patch that does not apply. Keeps the two
# most recently used trees (the normal one and, say, the broken one) and
# removes older ones: remaking one costs seconds.
prepare_tree() {
        local key p tmp t n=0
        key=$(source_manifest | sha256 | cut -c1-16)
        tree="$kcache/src/tree-$key"
        if [[ ! -f $tree/.tuck-source ]]; then
                prepare_pristine
                tmp="$kcache/src/.tree-$key.tmp"
                rm -rf "$tmp"
                link_pristine "$tmp"
                log "source is Linux $kver ($pkg $pkgver); applying ${#patches[@]} patches"
                for p in "${patches[@]}"; do
                        if ! apply_patch "$tmp" "$p"; then
                                rm -rf "$tmp"
                                die "the series does not apply to Linux $kver ($pkg $pkgver): patch '$p' fails (see above); refresh kernel/patches for this source version"
                        fi
                done
                echo "$kver" >"$tmp/.tuck-version"
                echo "$key" >"$tmp/.tuck-source"
                mv -T "$tmp" "$tree"
        fi
        touch "$tree/.tuck-source"
        kver=$(<"$tree/.tuck-version")
        while IFS= read -r t; do
                n=$((n + 1))
                ((n <= 2)) || rm -rf "${t%/.tuck-source}"
        done < <(ls -1t "$kcache"/src/tree-*/.tuck-source 2>/dev/null)
}

# Environment for a reproducible build; sets kmake for TREE and OBJ (OBJ
# must be a direct subdirectory of TREE, see above).
setup_kbuild() {
        local tree=$1 obj=$2
        # No wall clock, user or host in the image. The timestamp is the
        # tarball's mtime, which comes from the .deb and changes with it.
        SOURCE_DATE_EPOCH=$(stat -c %Y "$tarball")
        export SOURCE_DATE_EPOCH KBUILD_BUILD_TIMESTAMP
        KBUILD_BUILD_TIMESTAMP=$(LC_ALL=C date -u -d "@$SOURCE_DATE_EPOCH" '+%a %b %e %H:%M:%S UTC %Y')
        export KBUILD_BUILD_USER=tuck KBUILD_BUILD_HOST=tuck KBUILD_BUILD_VERSION=1
        export LC_ALL=C TZ=UTC
        kmake=(make -C "$tree" O="$obj" ARCH=x86_64)
        if command -v ccache >/dev/null; then
                export CCACHE_DIR="$cache/ccache" CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
                # The working directory is the object directory, whose
                # name differs between trees; the command lines do not.
                export CCACHE_NOHASHDIR=true
                # Depend mode: take dependencies from gcc's -MMD output
                # instead of running the preprocessor a second time on
                # every cache miss.
                export CCACHE_DEPEND=true
                kmake+=(CC="ccache gcc")
        fi
}

# ccache's hit and miss counters ("HITS MISSES"), to tell what one build
# took from the cache; "- -" without ccache.
ccache_counts() {
        if [[ -n ${CCACHE_DIR:-} ]]; then
                ccache --print-stats 2>/dev/null |
                        awk '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" {h += $2}
                             $1 == "cache_miss" {m = $2} END {print h + 0, m + 0}'
        else
                echo "- -"
        fi
}

# "H hits, M misses" since ccache_counts printed BEFORE.
ccache_delta() {
        local before=$1 after
        after=$(ccache_counts)
        [[ $after != "- -" ]] || { echo "not used"; return; }
        awk -v b="$before" -v a="$after" 'BEGIN {split(b, x, " "); split(a, y, " ");
                printf "%d hits, %d misses\n", y[1] - x[1], y[2] - x[2]}'
}

# The fragment files of VARIANT, in merge order (dies if one is missing).
variant_fragment_files() {
        local f
        [[ -n ${variant_fragments[$1]:-} ]] || die "unknown variant '$1' (known: ${!variant_fragments[*]})"
        for f in ${variant_fragments[$1]}; do
                [[ -r $configdir/$f.config ]] || die "config fragment '$configdir/$f.config' not found"
                echo "$configdir/$f.config"
        done
}

# Write OBJ/.config for VARIANT: allnoconfig + its fragments, then
# olddefconfig; dies unless every option a fragment sets ended up exactly
# so (a dependency that silently drops an option would otherwise give a
# kernel without it). Needs kmake (setup_kbuild) and tree.
configure_variant() {
        local variant=$1 obj=$2 frags
        mapfile -t frags < <(variant_fragment_files "$variant")
        mkdir -p "$obj"
        (cd "$tree" && KCONFIG_CONFIG="$obj/.config" ./scripts/kconfig/merge_config.sh -n -O "$obj" "${frags[@]}") \
                >"$obj/config.log" 2>&1 || { cat "$obj/config.log" >&2; die "merging config fragments failed"; }
        "${kmake[@]}" olddefconfig >>"$obj/config.log" 2>&1 || { cat "$obj/config.log" >&2; die "make olddefconfig failed"; }

        local -A want from have
        local frag name line sym val bad=0
        # What the fragments ask for; a later fragment overrides an earlier one.
        for frag in "${frags[@]}"; do
                name=${frag##*/}
                while IFS= read -r line; do
                        if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
                                sym=${BASH_REMATCH[1]} val=${BASH_REMATCH[2]}
                        elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
                                sym=${BASH_REMATCH[1]} val=n
                        else
                                continue
                        fi
                        want[$sym]=$val from[$sym]=$name
                done <"$frag"
        done
        # What the final .config has; an absent symbol counts as 'n'.
        while IFS= read -r line; do
                [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]] && have[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
        done <"$obj/.config"
        for sym in "${!want[@]}"; do
                val=${have[$sym]:-n}
                if [[ $val != "${want[$sym]}" ]]; then
                        echo "${from[$sym]}: $sym wanted '${want[$sym]}', got '$val'" >&2
                        bad=1
                fi
        done
        ((bad == 0)) || die "the $variant config does not have every option its fragments ask for (see above); fix the fragment or its dependencies"
}
