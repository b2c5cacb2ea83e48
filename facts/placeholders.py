"""Values the AWS documentation uses as examples: copied into a stack file, they are placeholders nobody
replaced (pure data). The documentation address ranges (RFC 5737, RFC 3849) are in `config.types`."""

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
