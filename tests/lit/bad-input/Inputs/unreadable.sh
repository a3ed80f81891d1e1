#!/usr/bin/env bash
# Runs `rnnc check` on a file it may not read (mode 000), directly and through
# an import, writing each run's stderr to $4 and $5. As root (who reads
# anything) rnnc runs as 'nobody'; the files live in a fresh folder under /tmp
# that 'nobody' can enter, whatever the permissions of the build folder are.
# usage: unreadable.sh PYTHON EXPECT_PY RNNC DIRECT_ERR IMPORT_ERR
set -euo pipefail
python=$1 expect=$2 rnnc=$3 direct_err=$4 import_err=$5
dir=$(mktemp -d /tmp/rnnc-unreadable.XXXXXX)
trap 'chmod -R u+rwX "$dir"; rm -rf "$dir"' EXIT
chmod 755 "$dir"
printf 'dim H = 4\n' > "$dir/secret.rnn" && chmod 000 "$dir/secret.rnn"
printf 'import "secret.rnn"\n' > "$dir/importer.rnn" && chmod 644 "$dir/importer.rnn"
as=()
if [ "$(id -u)" = 0 ]; then
  # The binary must be reachable by 'nobody' too: run a copy from the folder.
  cp "$rnnc" "$dir/rnnc" && chmod 755 "$dir/rnnc"
  rnnc="$dir/rnnc"
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
"$python" "$expect" --exit 1 --stderr "$direct_err" -- "${as[@]}" "$rnnc" check "$dir/secret.rnn"
"$python" "$expect" --exit 1 --stderr "$import_err" -- "${as[@]}" "$rnnc" check "$dir/importer.rnn"
