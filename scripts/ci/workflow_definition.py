"""Write the build workflow's Amazon States Language definition from template.yaml as
Step Functions receives it: its DefinitionSubstitutions filled in with values of the right
shape (an ARN, a bucket, a number), for an ASL validator (scripts/ci/lint_infra.sh runs
asl-validator on it: cfn-lint does not look inside a definition with substitutions).

Run with the infra venv's Python: python workflow_definition.py TEMPLATE OUT.json
"""

import json
import sys

from samcli.yamlhelper import yaml_parse

# A value of the shape each substitution takes once deployed.
SAMPLES = {
    "BuildFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:stack-index-build",
    "FailureTopicArn": "arn:aws:sns:us-east-1:123456789012:stack-failures",
    "Concurrency": 10,
    "WorkflowTimeout": 14400,
    "IndexBucket": "stack-indexbucket-abc",
    "MapResultsPrefix": "indexes/demo/builds/map-results",
}


def fill(value):
    if isinstance(value, dict):
        return {k: fill(v) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v) for v in value]
    if isinstance(value, str) and value.startswith("${") and value.endswith("}") and value[2:-1] in SAMPLES:
        return SAMPLES[value[2:-1]]
    if isinstance(value, str):
        for name, sample in SAMPLES.items():
            value = value.replace("${" + name + "}", str(sample))
    return value


def main(path, out):
    with open(path) as f:
        template = yaml_parse(f.read())
    machine = template["Resources"]["IndexBuildWorkflow"]["Properties"]
    unknown = set(machine["DefinitionSubstitutions"]) - set(SAMPLES)
    assert not unknown, f"no sample value for {sorted(unknown)}"
    with open(out, "w") as f:
        json.dump(fill(machine["Definition"]), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
