#!/usr/bin/env bash
# Vendor reveal.js so that the chapter slide decks (scripts/build_slides.py) open
# with no network.
# Source: the npm registry package reveal.js@4.0.2 (MIT), the version nbconvert's
# "reveal" template is written for (its default reveal_url_prefix is
# https://unpkg.com/reveal.js@4.0.2); the tarball has sha256
# 0c234d5bfe539606c1af4bcc031f0d21ed99e264d90b7859abad34f7e3a0c587.
# We keep the UMD bundle, its core style sheet, the "white" theme with its
# Source Sans Pro web fonts (woff only: every browser reveal.js 4 supports reads
# woff) and the speaker-notes plugin.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack reveal.js@4.0.2 >/dev/null
echo "0c234d5bfe539606c1af4bcc031f0d21ed99e264d90b7859abad34f7e3a0c587  reveal.js-4.0.2.tgz" | sha256sum -c -
tar xzf reveal.js-4.0.2.tgz
dest="$here/slides/reveal.js"
rm -rf "$dest"
mkdir -p "$dest/dist/theme/fonts/source-sans-pro" "$dest/plugin/notes"
cp package/dist/reveal.js package/dist/reveal.css "$dest/dist/"
cp package/dist/theme/white.css "$dest/dist/theme/"
cp package/dist/theme/fonts/source-sans-pro/*.woff \
   package/dist/theme/fonts/source-sans-pro/source-sans-pro.css \
   package/dist/theme/fonts/source-sans-pro/LICENSE \
   "$dest/dist/theme/fonts/source-sans-pro/"
cp package/plugin/notes/notes.js "$dest/plugin/notes/"
cp package/LICENSE "$dest/LICENSE"
printf 'reveal.js 4.0.2 from the npm registry (MIT); see scripts/vendor_revealjs.sh\n' > "$dest/VERSION"
