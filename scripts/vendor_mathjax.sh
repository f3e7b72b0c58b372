#!/usr/bin/env bash
# Vendor MathJax so that the site typesets math with no network.
# Source: the npm registry package mathjax@3.2.2 (Apache-2.0), whose tarball has
# sha256 1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09.
# We keep the CommonHTML TeX bundle, its woff-v2 fonts, the TeX extensions it
# autoloads, and the menu/accessibility components it may load on demand.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack mathjax@3.2.2 >/dev/null
echo "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09  mathjax-3.2.2.tgz" | sha256sum -c -
tar xzf mathjax-3.2.2.tgz
dest="$here/book/_static/mathjax"
rm -rf "$dest"
mkdir -p "$dest/output/chtml/fonts" "$dest/input/tex"
cp package/es5/tex-chtml.js "$dest/"
cp -r package/es5/output/chtml/fonts/woff-v2 "$dest/output/chtml/fonts/"
cp -r package/es5/input/tex/extensions "$dest/input/tex/"
cp -r package/es5/ui package/es5/a11y "$dest/"
cp package/LICENSE "$dest/LICENSE"
printf 'mathjax 3.2.2 from the npm registry (Apache-2.0); see scripts/vendor_mathjax.sh\n' > "$dest/VERSION"
