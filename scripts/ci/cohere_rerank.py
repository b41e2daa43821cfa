"""One rerank with Cohere's official Python SDK (`cohere`, pinned in requirements-sdk.txt).

The hosted-reranker test uses it to check that the local protocol server speaks the Cohere
Rerank API v2 as Cohere's own client does. That server is what Sextant's Cohere client is
tested against.

Reads one JSON object on stdin: {"base_url", "api_key", "model", "query", "documents", "top_n"}.
Prints {"results": [{"index", "relevance_score"}]}, or {"error": {"status", "body"}} when the
SDK raises its API error.
"""

import json
import sys

import cohere
from cohere.core.api_error import ApiError


def main() -> None:
    ask = json.load(sys.stdin)
    client = cohere.ClientV2(api_key=ask["api_key"], base_url=ask["base_url"], max_retries=0, timeout=30)
    try:
        answer = client.rerank(
            model=ask["model"], query=ask["query"], documents=ask["documents"], top_n=ask.get("top_n")
        )
    except ApiError as e:
        print(json.dumps({"error": {"status": e.status_code, "body": e.body}}))
        return
    print(json.dumps({"results": [{"index": r.index, "relevance_score": r.relevance_score} for r in answer.results]}))


if __name__ == "__main__":
    main()
