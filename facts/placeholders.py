"""Values the AWS documentation uses as examples, and domain names reserved for examples: copied into a stack
file, they are placeholders nobody replaced (pure data). The documentation address ranges (RFC 5737, RFC
3849) are in `config.types`."""

from typing import Final

_IAM_CLOUDTRAIL = "https://docs.aws.amazon.com/IAM/latest/UserGuide/cloudtrail-integration.html"

DOCUMENTATION_ACCOUNTS: Final[dict[str, str]] = {
    "111122223333": f"IAM user guide, {_IAM_CLOUDTRAIL} (the role EC2-dev in account 111122223333); EKS user "
    "guide, cross-account access (awsdocs/amazon-eks-user-guide "
    "latest/ug/manage-access/aws-access/cross-account-access.adoc)",
    "123456789012": "IAM user guide, "
    "https://docs.aws.amazon.com/IAM/latest/UserGuide/access_policies_policy-summary-examples.html "
    "(arn:aws:dynamodb:us-west-1:123456789012:table/myDynamoTable); the AWS CLI reference's examples",
    "444455556666": "EKS best practices guide, multi-account strategy "
    "(https://docs.aws.amazon.com/eks/latest/best-practices/multi-account-strategy.html: "
    "arn:aws:iam::444455556666:role/account-b-role)",
    "777788889999": f"IAM user guide, {_IAM_CLOUDTRAIL} (the IAM user JohnDoe in account 777788889999)",
}
"""AWS account ids the AWS documentation uses in its examples, each with where it does. No organization
deploys with them: an ARN in one of them is a copied example."""


def documentation_account(arn: str) -> str | None:
    """The documentation account an ARN (`arn:<partition>:<service>:<region>:<account>:...`) belongs to."""
    parts = arn.split(":")
    account = parts[4] if len(parts) > 5 else ""
    return account if account in DOCUMENTATION_ACCOUNTS else None


DOCUMENTATION_DOMAINS: Final[dict[str, str]] = {
    "example.com": "RFC 2606 section 3 (https://www.rfc-editor.org/rfc/rfc2606#section-3)",
    "example.net": "RFC 2606 section 3",
    "example.org": "RFC 2606 section 3",
    "example": "RFC 2606 section 2, RFC 6761 section 6.5",
    "test": "RFC 2606 section 2, RFC 6761 section 6.2",
    "invalid": "RFC 2606 section 2, RFC 6761 section 6.4",
}
"""Domain names reserved for documentation and testing, each with where it is: no mailbox or web service of
anyone's lives under them, so an e-mail address or URL there is a copied example."""


def documentation_domain(host: str) -> str | None:
    """The reserved domain a host name (`hc-ping.example.com`) or e-mail domain lies under, if any."""
    name = host.lower().rstrip(".")
    return next((d for d in DOCUMENTATION_DOMAINS if name == d or name.endswith(f".{d}")), None)
