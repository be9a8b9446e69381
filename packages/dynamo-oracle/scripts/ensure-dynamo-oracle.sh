#!/usr/bin/env bash
# Ensure the Dynamo oracle (rust/: a small program over Dynamo's own dynamo-kv-router crate from
# crates.io) is built at <repo>/.infra/cargo-target/release/vantage-dynamo-oracle.
#
# Dynamo's own code, as the independent implementation we check against: its RadixTree for the
# prefix index (packages/prefix-index/test/dynamo-differential.test.ts), its serde encoders for our
# wire decoders (packages/wire/test/dynamo-serde.test.ts), its block hashing for ours
# (packages/hashing/test/dynamo-hashing.test.ts), and the same-machine peer of `npm run bench:index`.
# Idempotent: once built, cargo's up-to-date check takes about a second and no network. The first
# build fetches the locked crates from crates.io and takes a few minutes on 2 cores. Prints the
# binary's path on success (the callers read the last line).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
target="$repo_root/.infra/cargo-target"
bin="$target/release/vantage-dynamo-oracle"

if ! command -v cargo >/dev/null 2>&1; then
  echo "ensure-dynamo-oracle: cargo is not on PATH (install Rust: the oracle is built from crates.io)" >&2
  exit 1
fi

# Serialise concurrent builds (parallel test workers, CI jobs).
mkdir -p "$target"
exec 9>"$target/.oracle.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

cargo build --release --locked --quiet \
  --manifest-path "$repo_root/packages/dynamo-oracle/rust/Cargo.toml" \
  --target-dir "$target" >&2
echo "$bin"
