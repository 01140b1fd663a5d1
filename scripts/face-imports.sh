#!/usr/bin/env bash
# Rewrites paths in the faces (cos/) after files move out of the core crate: idempotent, so it
# can be re-run whenever a file written against the old single-crate layout lands in cos/.
#   cos/src:   crate::<core module or root item> -> createos_sandbox::…,
#              createos_sandbox::{tools,mcp,herdr,cli} -> crate::…
#   cos/tests, cos/benches: createos_sandbox::{tools,mcp,herdr,cli} -> cos::…
set -euo pipefail
cd "$(dirname "$0")/.."
core='api|auth|client|config|error|fuzzing|guest|jobs|pty|snapshot|shell|ssh|stream|sync|transfer|transport|tunnel|validate|classify'
find cos/src -name '*.rs' -print0 | xargs -0 perl -pi -e "
  s/\bcrate::($core)\b/createos_sandbox::\$1/g;
  s/\bcrate::([A-Z]\w*)/createos_sandbox::\$1/g;
  s/\buse crate::\{((?:\s*(?:[A-Z]\w*|$core)\s*,?)+)\}/use createos_sandbox::{\$1}/g;
  s/\bcreateos_sandbox::(tools|mcp|herdr|cli)\b/crate::\$1/g;
"
find cos/tests cos/benches -name '*.rs' -print0 | xargs -0 perl -pi -e "
  s/\bcreateos_sandbox::(tools|mcp|herdr|cli)\b/cos::\$1/g;
"
