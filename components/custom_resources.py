"""Custom resources keep their Pulumi identity across API versions.

pulumi-kubernetes types a custom resource `kubernetes:<group>/<version>:<Kind>`, and the type token is part
of the URN: a CRD's move to a new version (NodeOverlay `karpenter.sh/v1alpha1` -> `v1beta1`, as NodePool
went v1beta1 -> v1) would make the engine create the object under the new URN (it exists already: the
create fails) and delete the old one. With an alias for each other version the engine moves the state
instead, and pulumi-kubernetes updates the object in place (a changed `apiVersion` is no force-new field:
provider/pkg/provider/provider.go `Diff`, which replaces only on `.metadata.name`/`.namespace` and the
kind's force-new fields). The SDK does the same for the built-in kinds (e.g. `apps/v1` Deployment aliases
`apps/v1beta1`, `apps/v1beta2` and `extensions/v1beta1`); `apiextensions.CustomResource` adds none.
"""

import pulumi

API_VERSIONS = ("v1alpha1", "v1alpha2", "v1beta1", "v1beta2", "v1", "v2alpha1", "v2beta1", "v2")
"""The versions a Kubernetes API moves through (alpha, beta, stable; Kubernetes API conventions,
"API versioning": https://kubernetes.io/docs/reference/using-api/#api-versioning), as far as a custom
resource of this program might plausibly go: aliased both ways, so a version bump and its revert are
updates."""


def api_version_aliases(api_version: str, kind: str) -> list[pulumi.Alias]:
    """Aliases naming the custom resource `kind` of `api_version`'s group at every other version."""
    group, _, current = api_version.rpartition("/")
    return [pulumi.Alias(type_=f"kubernetes:{group}/{v}:{kind}") for v in API_VERSIONS if v != current]
