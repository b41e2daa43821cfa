"""Print, for each function `sam build` builds from template.yaml with cargo lambda, its
logical id and the binary its BuildProperties name: one `LogicalId Binary` line each.

The template is expanded as `sam build` expands it (SAM CLI's AWS::LanguageExtensions, no
parameter given), so each shard function of the Fn::ForEach loop is listed by its own id.
scripts/ci/arm64_build.sh checks each function's build directory against this list: the
functions `retrieve` and `search` are the same code, so their binaries are byte-identical
and a binary's hash alone cannot say which function it was built for.

Run with a Python that has aws-sam-cli: python sam_functions.py TEMPLATE
"""

import sys

from samcli.lib.cfn_language_extensions.api import process_template
from samcli.yamlhelper import yaml_parse


def main(path):
    with open(path) as f:
        template = yaml_parse(f.read())
    resources = process_template(template, parameter_values={})["Resources"]
    for logical_id, resource in sorted(resources.items()):
        metadata = resource.get("Metadata") or {}
        if metadata.get("BuildMethod") == "rust-cargolambda":
            print(logical_id, metadata["BuildProperties"]["Binary"])


if __name__ == "__main__":
    main(sys.argv[1])
