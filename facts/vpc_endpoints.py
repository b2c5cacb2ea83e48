"""VPC endpoints: which AWS APIs the cluster and its deployer call from the private subnets, and what an
endpoint costs (pure data).

Service names are resolved at deploy time with the `aws_vpc_endpoint_service` data source (`service`,
`service_type`): it asks EC2 for `com.amazonaws.<region>.<service>` and fails the preview where the region
offers no such service (terraform-provider-aws ec2/vpc_endpoint_service_data_source.go). In the China
regions a few services are named `cn.com.amazonaws...`; there those fail the preview rather than being
skipped.
"""

from typing import Final, Literal

InterfaceService = Literal[
    "ec2", "ecr.api", "ecr.dkr", "eks", "eks-auth", "sqs", "ssm", "sts", "aps-workspaces"
]
"""The interface endpoints a stack may declare (`gpu-eks:network.endpoints.interface`)."""

INTERFACE_SERVICES: Final[dict[InterfaceService, str]] = {
    "ec2": "Karpenter (launch, terminate, describe), the VPC CNI (ENIs and pod IPs), the EBS CSI driver",
    "ecr.api": "image pulls from ECR: the registry API (authorization tokens)",
    "ecr.dkr": "image pulls from ECR: manifests (the layers come from S3, through the S3 gateway endpoint)",
    "eks": "eks:DescribeCluster (Karpenter at start, `aws eks update-kubeconfig` on the runner)",
    "eks-auth": "EKS Pod Identity credentials (Karpenter's controller, the EBS CSI driver)",
    "sqs": "Karpenter's interruption queue",
    "ssm": "Karpenter's AMI alias lookups (public SSM parameters)",
    "sts": "web-identity credentials: the in-VPC runner's OIDC role, IRSA",
    "aps-workspaces": "remote write to Amazon Managed Service for Prometheus (the managed backend)",
}
"""Each interface endpoint the program offers, and who calls that API from inside the VPC. Service names as
AWS lists them (EC2 user guide, "AWS services that integrate with AWS PrivateLink":
https://docs.aws.amazon.com/vpc/latest/privatelink/aws-services-privatelink-support.html)."""

S3_GATEWAY_SERVICE: Final = "s3"
"""The S3 gateway endpoint: routes on the route tables, no hourly or per-GB charge ("There is no additional
charge for using gateway endpoints": https://docs.aws.amazon.com/vpc/latest/privatelink/gateway-endpoints.html).
ECR stores image layers in S3, so with it layer downloads skip the NAT gateways."""

INTERFACE_ENDPOINT_USD_PER_AZ_HOUR: Final = 0.01
INTERFACE_ENDPOINT_USD_PER_GB: Final = 0.01
"""AWS PrivateLink, interface endpoints, US East (N. Virginia) and US West (Oregon): USD per endpoint per
Availability Zone per hour (a partial hour is a full hour), and per GB processed (first PB a month)
(https://aws.amazon.com/privatelink/pricing/, read 2026-12). Other regions charge somewhat more."""

NAT_GATEWAY_USD_PER_GB: Final = 0.045
"""NAT gateway data processing, USD per GB, US East (N. Virginia) and US West (Oregon)
(https://aws.amazon.com/vpc/pricing/, read 2026-12): what traffic to AWS APIs and S3 costs without an
endpoint, on top of the gateway's hourly charge."""


def interface_endpoints_usd_per_hour(endpoints: int, zones: int) -> float:
    """The hourly charge of `endpoints` interface endpoints, each with an ENI in `zones` zones, before any
    data is processed."""
    return round(endpoints * zones * INTERFACE_ENDPOINT_USD_PER_AZ_HOUR, 4)
