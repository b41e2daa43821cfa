#!/usr/bin/env python3
"""Calls Retrieve through the official Alibaba Cloud Model Studio SDK
(`alibabacloud-bailian20231229`, unmodified; `scripts/ci/requirements-sdk.txt`) against a
Sextant server, as a real client would, and prints one JSON line per call: the response
body, or the SDK's error (`code`, `statusCode`, `message`).

    python3 scripts/ci/sdk_retrieve.py --endpoint 127.0.0.1:8080 --key KEY --workspace ws CALLS.json

CALLS.json is a list of RetrieveRequest maps in the SDK's own field names (`IndexId`,
`Query`, `QueryHistory`, ...), turned into the SDK's models with `from_map`.
"""
import argparse
import json
import sys

from alibabacloud_bailian20231229 import models
from alibabacloud_bailian20231229.client import Client
from alibabacloud_tea_openapi import models as open_api_models
from darabonba.runtime import RuntimeOptions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--endpoint", required=True, help="host:port")
    ap.add_argument("--key", required=True, help="the Sextant API key (sent as X-API-Key)")
    ap.add_argument("--workspace", default="ws")
    ap.add_argument("calls")
    a = ap.parse_args()
    # The SDK signs every call with an AccessKey (ACS3-HMAC-SHA256 in Authorization);
    # Sextant authenticates the API key in X-API-Key and ignores that signature.
    config = open_api_models.Config(
        access_key_id="sextant-local", access_key_secret="unused", endpoint=a.endpoint, protocol="http"
    )
    client = Client(config)
    for call in json.load(open(a.calls)):
        request = models.RetrieveRequest().from_map(call)
        try:
            response = client.retrieve_with_options(
                a.workspace, request, {"X-API-Key": a.key}, RuntimeOptions(read_timeout=60000)
            )
            print(json.dumps({"ok": True, "status": response.status_code, "body": response.body.to_map()}))
        except Exception as e:  # the SDK raises its own exception types with these fields
            print(json.dumps({
                "ok": False,
                "code": getattr(e, "code", None),
                "statusCode": getattr(e, "status_code", None) or (getattr(e, "data", None) or {}).get("statusCode"),
                "message": getattr(e, "message", str(e)),
            }))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
