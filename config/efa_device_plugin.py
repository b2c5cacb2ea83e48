"""The `gpu-eks:efaDevicePlugin` section: the AWS EFA Kubernetes device plugin's Helm chart version.

The plugin is installed only when some pool has `efa: true`; where it runs and what it tolerates follow from
those pools (`components.efa_device_plugin`), so the chart version is all there is to choose.
"""

import re

from pydantic import Field, field_validator

from config.base import ConfigModel

CHART_NAME = "aws-efa-k8s-device-plugin"
"""Helm chart name of the AWS EFA Kubernetes device plugin."""
CHART_REPOSITORY = "https://aws.github.io/eks-charts"
"""Helm repository of the chart (EKS charts)."""
DEFAULT_VERSION = "v0.5.20"
"""Chart version the values builder and its tests are written against (the chart's tags carry the `v`)."""
SUPPORTED_CHART_SERIES = "0.5"
"""Chart minor series whose values the builder may set (keys checked against v0.5.20's values.yaml)."""

_VERSION = re.compile(r"v?(?P<major>[0-9]+)\.(?P<minor>[0-9]+)\.[0-9]+")


class EfaDevicePluginConfig(ConfigModel):
    """`gpu-eks:efaDevicePlugin`: the AWS EFA device plugin release (only declared when a pool has EFA)."""

    version: str = Field(default=DEFAULT_VERSION)
    """Chart version as the EKS charts repository tags it (`v0.5.20`). Only v0.5 releases: the values are
    written for that series."""

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        match = _VERSION.fullmatch(value)
        if match is None:
            raise ValueError("must be an exact chart version such as v0.5.20")
        if f"{match['major']}.{match['minor']}" != SUPPORTED_CHART_SERIES:
            raise ValueError(
                f"the EFA device plugin values are built and tested for the v{SUPPORTED_CHART_SERIES} "
                f"series (v{SUPPORTED_CHART_SERIES}.x); another series needs its chart values vendored and "
                "reviewed first"
            )
        return value
