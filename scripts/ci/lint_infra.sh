#!/usr/bin/env bash
# Lint the SAM template offline: cfn-lint, then `sam validate --lint`, the build workflow's
# definition with asl-validator, then the shard functions' Fn::ForEach expanded for every
# ShardCount (scripts/ci/expand_shards.py).
#
# Creates (once) a venv with pinned cfn-lint and aws-sam-cli and reuses it afterwards.
# Needs no AWS account: dummy credentials and a fixed region are set for this process only,
# and SAM CLI telemetry is off. Exits non-zero on any finding (errors and warnings).
#
#   SEXTANT_CACHE_DIR   default ~/.cache/sextant   (venv at $SEXTANT_CACHE_DIR/infra-venv)
#
# Usage: bash scripts/ci/lint_infra.sh [template.yaml]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
venv="$cache/infra-venv"
template=${1:-$repo/template.yaml}

# Bump together; aws-sam-cli pins its own cfn-lint range, keep the two compatible.
CFN_LINT_VERSION=1.58.0
SAM_CLI_VERSION=1.170.0
stamp="cfn-lint==$CFN_LINT_VERSION aws-sam-cli==$SAM_CLI_VERSION"

if [ ! -x "$venv/bin/sam" ] || [ ! -x "$venv/bin/cfn-lint" ] \
   || [ "$(cat "$venv/.sextant-stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "lint_infra: installing $stamp into $venv" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    "cfn-lint==$CFN_LINT_VERSION" "aws-sam-cli==$SAM_CLI_VERSION"
  echo "$stamp" > "$venv/.sextant-stamp"
fi

# Offline and anonymous: no telemetry, no update checks, no real credentials.
export SAM_CLI_TELEMETRY=0
export SAM_CLI_DISABLE_UPDATE_CHECK=1   # harmless if this SAM version ignores it
export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE
export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
export AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
unset AWS_PROFILE AWS_SESSION_TOKEN
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_EC2_METADATA_DISABLED=true

status=0
echo "== cfn-lint $template" >&2
# cfn-lint exits non-zero on errors (2), warnings (4) and informational findings (8).
"$venv/bin/cfn-lint" --format parseable -- "$template" || status=1

echo "== sam validate --lint" >&2
# sam validate --lint runs cfn-lint through SAM and prints findings; make its exit decisive.
# With the transform's loop expanded first, as `sam build` and `sam deploy` run it.
out=$(cd "$(dirname "$template")" && SAM_CLI_ENABLE_LANGUAGE_EXTENSIONS=1 "$venv/bin/sam" validate --lint \
        --template-file "$template" --region us-east-1 2>&1) || status=1
printf '%s\n' "$out"
if ! printf '%s\n' "$out" | grep -q "is a valid SAM Template"; then status=1; fi

# The build workflow's definition, as Step Functions receives it, against the Amazon States
# Language schema (asl-validator, pinned, from npm): cfn-lint does not look inside a
# definition with substitutions.
ASL_VALIDATOR_VERSION=4.0.0
asl="$cache/asl-validator-$ASL_VALIDATOR_VERSION"
if [ ! -x "$asl/node_modules/.bin/asl-validator" ]; then
  echo "lint_infra: installing asl-validator@$ASL_VALIDATOR_VERSION into $asl" >&2
  mkdir -p "$asl"
  npm install --silent --no-audit --no-fund --prefix "$asl" "asl-validator@$ASL_VALIDATOR_VERSION" >&2
fi
if grep -q "IndexBuildWorkflow:" "$template"; then
  echo "== asl-validator (IndexBuildWorkflow)" >&2
  definition=$(mktemp --suffix=.json)
  "$venv/bin/python" "$here/workflow_definition.py" "$template" "$definition" \
    && "$asl/node_modules/.bin/asl-validator" --json-path "$definition" || status=1
  rm -f "$definition"
fi

# The shard functions' loop, expanded for every ShardCount as `sam build` expands it.
if grep -q "Fn::ForEach::ShardFunctions" "$template"; then
  echo "== expand_shards" >&2
  "$venv/bin/python" "$here/expand_shards.py" "$template" || status=1
fi

if [ "$status" -ne 0 ]; then
  echo "lint_infra: FAILED" >&2
else
  echo "lint_infra: ok" >&2
fi
exit "$status"
