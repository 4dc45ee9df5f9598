#!/usr/bin/env bash
# Development-time build of the instructor's YAML editor (never run at serve time, never by setup.sh):
# CodeMirror 6 + its YAML mode, bundled with esbuild into one file under static/vendor/codemirror/.
# Versions are pinned in scripts/editor/package.json and package-lock.json; record them in
# static/vendor/VERSIONS.md when they change. Needs node and npm.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/scripts/editor"
npm ci --no-fund --no-audit >/dev/null
out="$root/static/vendor/codemirror"
mkdir -p "$out"
node_modules/.bin/esbuild src/yaml-editor.mjs --bundle --minify --format=iife --global-name=CourseEditor \
  --target=es2020 --legal-comments=none --outfile="$out/yaml-editor.min.js"
# One licence file: every bundled package is MIT (CodeMirror's by Marijn Haverbeke and others).
cp node_modules/codemirror/LICENSE "$out/LICENSE"
node -e '
  const lock = require("./package-lock.json").packages;
  const names = Object.keys(lock).filter((k) => k.startsWith("node_modules/") && !lock[k].dev && !k.includes("esbuild"));
  console.log(names.map((k) => `${k.slice(13)}@${lock[k].version} (${lock[k].license})`).join("\n"));
' > "$out/BUNDLED.txt"
echo "built $out/yaml-editor.min.js ($(wc -c <"$out/yaml-editor.min.js") bytes); bundled packages in $out/BUNDLED.txt"
