"""Expand template.yaml's Fn::ForEach with SAM CLI's implementation of the
AWS::LanguageExtensions transform (what `sam build` runs; CloudFormation runs its own at
deploy), with no parameter given and for each ShardCount, and check what comes out: one shard function per shard (named
<stack>-shard-<k>, SEXTANT_SHARD = k, created only when the index is sharded) with an alarm
on its Lambda errors, and the routers pointed at them. SAM CLI resolves what it can for a
local build (a !Sub becomes a plain string), so names are checked by their ending.

Run by scripts/ci/lint_infra.sh with the venv's Python: python expand_shards.py TEMPLATE
"""

import json
import sys

from samcli.lib.cfn_language_extensions.api import process_template
from samcli.yamlhelper import yaml_parse


def expand(template, shards):
    out = process_template(template, parameter_values={"ShardCount": str(shards)})
    return out["Resources"]


def main(path):
    with open(path) as f:
        template = yaml_parse(f.read())
    counts = template["Parameters"]["ShardCount"]["AllowedValues"]
    # With no parameter given, as a plain `sam build` expands it: the template's own default
    # (SAM CLI refused a number there, "Fn::FindInMap layout is incorrect").
    default = template["Parameters"]["ShardCount"]["Default"]
    out = process_template(template, parameter_values={})["Resources"]
    assert sorted(k for k in out if k.startswith("ShardFunction")) == sorted(
        k for k in expand(template, default) if k.startswith("ShardFunction")
    ), default
    for count in counts:
        resources = expand(template, count)
        def numbered(prefix):
            names = [k for k in resources if k.startswith(prefix)]
            return sorted(names, key=lambda k: int(k[len(prefix):]))

        functions = numbered("ShardFunction")
        alarms = numbered("ShardErrorsAlarm")
        want = [str(k) for k in range(max(int(count), 1))]
        assert functions == [f"ShardFunction{k}" for k in want], (count, functions)
        assert alarms == [f"ShardErrorsAlarm{k}" for k in want], (count, alarms)
        for k in want:
            f = resources[f"ShardFunction{k}"]
            assert f["Condition"] == "IsSharded", f
            props = f["Properties"]
            assert props["Environment"]["Variables"]["SEXTANT_SHARD"] == k, props
            assert str(props["FunctionName"]).endswith(f"-shard-{k}"), props
            alarm = resources[f"ShardErrorsAlarm{k}"]
            assert alarm["Condition"] == "IsSharded", alarm
            assert alarm["Properties"]["Dimensions"][0]["Value"] == props["FunctionName"], alarm
        # The routers reach the functions by the name the loop gives them, when sharded.
        for router in ["RetrieveFunction", "SearchFunction"]:
            env = resources[router]["Properties"]["Environment"]["Variables"]
            pattern = json.dumps(env["SEXTANT_SHARD_FUNCTION"])
            assert ("-shard-{k}" in pattern) == (str(count) != "0"), (count, pattern)
    print(f"expand_shards: ShardCount {', '.join(map(str, counts))} expand as expected", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
