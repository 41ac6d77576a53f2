#!/usr/bin/env bash
# Check the import contracts of .importlinter (docs/ARCHITECTURE.md's layers).
# grimp reads packages from disk and cannot see the package-dir mapping of callbacks/, datamodules/,
# kernels/ into litlab, so the checked tree is staged as an installed package would lay it out.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/litlab"
(cd src/litlab && find . -name '*.py' -exec cp --parents {} "$stage/litlab/" \;)
for folder in callbacks datamodules kernels; do
  mkdir -p "$stage/litlab/$folder"
  (cd "$folder" && find . -name '*.py' -exec cp --parents {} "$stage/litlab/$folder/" \;)
done
PYTHONPATH="$stage" "${LINT_IMPORTS:-lint-imports}" .importlinter --no-cache
