#!/usr/bin/env bash
# Development-time refresh of static/vendor from the npm registry (never run at serve time).
# Update the versions here and in static/vendor/VERSIONS.md together.
set -euo pipefail
HTMX=4.0.1 KATEX=0.19.1 AXE=4.14.1 SWAGGER=5.35.0
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack "htmx.org@$HTMX" "katex@$KATEX" "axe-core@$AXE" "swagger-ui-dist@$SWAGGER" >/dev/null
for f in *.tgz; do mkdir -p "${f%.tgz}"; tar xzf "$f" -C "${f%.tgz}"; done
v="$root/static/vendor"
cp "htmx.org-$HTMX/package/dist/htmx.min.js" "htmx.org-$HTMX/package/LICENSE" "$v/htmx/"
cp "katex-$KATEX/package/dist/katex.min.js" "katex-$KATEX/package/dist/katex.min.css" \
   "katex-$KATEX/package/dist/contrib/auto-render.min.js" "katex-$KATEX/package/LICENSE" "$v/katex/"
cp "katex-$KATEX/package/dist/fonts/"*.woff2 "$v/katex/fonts/"
cp "axe-core-$AXE/package/axe.min.js" "axe-core-$AXE/package/LICENSE" "$v/axe/"
mkdir -p "$v/swagger-ui"
cp "swagger-ui-dist-$SWAGGER/package/swagger-ui-bundle.js" "swagger-ui-dist-$SWAGGER/package/swagger-ui.css" \
   "swagger-ui-dist-$SWAGGER/package/LICENSE" "swagger-ui-dist-$SWAGGER/package/NOTICE" "$v/swagger-ui/"
echo "vendored htmx $HTMX, katex $KATEX, axe-core $AXE, swagger-ui-dist $SWAGGER"
echo "the YAML editor (CodeMirror) is built, not copied: scripts/build-editor.sh"
