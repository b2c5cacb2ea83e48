"""IAM policy documents as JSON-able dicts (pure): the one place that spells the policy language version
for every document the program declares (roles' trust, managed and inline policies, queue, topic and key
policies)."""

from typing import Any, Final

PolicyDocument = dict[str, Any]
"""An IAM policy document as a JSON-able dict (`json.dumps` it for `aws.iam.*Policy(policy=...)`)."""

POLICY_VERSION: Final = "2012-10-17"
"""The current policy language; a document that names none is read in the 2008 one."""


def policy_document(*statements: dict[str, Any], policy_id: str | None = None) -> PolicyDocument:
    """`{"Version": ..., ["Id": policy_id,] "Statement": [...]}` of `statements`."""
    document: PolicyDocument = {"Version": POLICY_VERSION}
    if policy_id is not None:
        document["Id"] = policy_id
    document["Statement"] = list(statements)
    return document
