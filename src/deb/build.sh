#!/bin/sh
# build.sh BUILD_DIR VERSION MULTIARCH — stage the package from a build
# configured for /usr and pack it with dpkg-deb. Prints the .deb's path.
#
# Depends is what dpkg-shlibdeps finds the two binaries need (inih and
# hiredis are linked in statically, so only libc and, for the CLI's
# seccomp launcher, libseccomp), and zlib1g, named in control.in: the
# library loads libz.so.1 with dlopen to read a compressed robots.txt,
# which dpkg-shlibdeps cannot see. The binaries are stripped as dh_strip
# would (the build's own copies keep their symbols).
set -eu
B=$1
VERSION=$2
MA=$3
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
root="$B/deb-root"
out="$B/rlshim_${VERSION}_${arch}.deb"

rm -rf "$root"
install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/$MA/rlshim" \
    "$root/usr/share/man/man1" "$root/usr/share/man/man5" \
    "$root/usr/share/doc/rlshim/examples"
install -m 0755 "$B/rlshim" "$root/usr/bin/rlshim"
install -m 0644 "$B/librlshim.so" "$root/usr/lib/$MA/rlshim/librlshim.so"
strip --remove-section=.comment --remove-section=.note "$root/usr/bin/rlshim"
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
    "$root/usr/lib/$MA/rlshim/librlshim.so"

gzip -9n < "$top/src/man/rlshim.1" > "$root/usr/share/man/man1/rlshim.1.gz"
gzip -9n < "$top/src/man/rlshim.ini.5" > "$root/usr/share/man/man5/rlshim.ini.5.gz"
install -m 0644 "$here/copyright" "$root/usr/share/doc/rlshim/copyright"
sed "s/@VERSION@/$VERSION/" "$here/changelog" | gzip -9n \
    > "$root/usr/share/doc/rlshim/changelog.Debian.gz"
for f in "$top"/conf/*.ini; do
    install -m 0644 "$f" "$root/usr/share/doc/rlshim/examples/"
done
# Each lintian warning we keep has an override with its reason above it
# (src/deb/lintian-overrides), shipped when the file has a tag in it.
if grep -q '^[^#]' "$here/lintian-overrides" 2>/dev/null; then
    install -d -m 0755 "$root/usr/share/lintian/overrides"
    cat "$here/lintian-overrides" \
        > "$root/usr/share/lintian/overrides/rlshim"
    chmod 0644 "$root/usr/share/lintian/overrides/rlshim"
fi

# dpkg-shlibdeps wants a debian/control beside it: a scratch one.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/debian"
printf 'Source: rlshim\n\nPackage: rlshim\nArchitecture: any\n' \
    > "$scratch/debian/control"
abs_root=$(cd "$root" && pwd)
depends=$(cd "$scratch" && dpkg-shlibdeps -O \
    "$abs_root/usr/bin/rlshim" "$abs_root/usr/lib/$MA/rlshim/librlshim.so" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "build.sh: dpkg-shlibdeps found no Depends" >&2; exit 1; }

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
    -e "s/@DEPENDS@/$depends/" "$here/control.in" > "$root/DEBIAN/control"
(cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) \
    > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
echo "$out"
