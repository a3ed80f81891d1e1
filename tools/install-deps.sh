#!/usr/bin/env bash
# Installs every dependency of rnnc from Debian's packages (and numpy from PyPI
# for the numeric tests). Safe to run twice: what is present is skipped.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config python3
  catch2 libcli11-dev libfmt-dev nlohmann-json3-dev
  libopenblas-dev
  clang-14 llvm-14-dev llvm-14-tools libclang-14-dev libclang-rt-14-dev
  libclang-cpp14-dev clang-format-14  # clang-format (its library in rnnc compile, its tool in a test), libTooling (tools/rnnc-inspect)
  graphviz chromium           # rnnc show --html draws the graph with dot; its test loads the page headless
)

bash "$(dirname "$0")/apt-install.sh" install-deps "${packages[@]}"

# From PyPI: numpy for the numeric tests' independent references; torch and
# pytest for the Python package (python/, docs/torch.md) and its tests. torch
# is large (about 6 GB with its CUDA libraries, 2 to 3 minutes here): once.
for module in numpy torch pytest; do
  if ! python3 -c "import $module" 2>/dev/null; then
    echo "install-deps: installing $module"
    python3 -m pip install --quiet "$module"
  fi
done
