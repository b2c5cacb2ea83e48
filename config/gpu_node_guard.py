"""The `gpu-eks:gpuNodeGuard` section: the controller that lifts the MIG startup taint and deletes GPU nodes
that never become usable (`components/gpu_node_guard/`)."""

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.types import DurationOrNever, KubernetesName, PinnedImage, WholeNumber, duration_seconds
from facts.karpenter_lifecycle import REGISTRATION_TIMEOUT_SECONDS

DEFAULT_IMAGE = (
    "gcr.io/distroless/python3-debian13:nonroot"
    "@sha256:4376456c1d8520c9d464f2c475465850efaecabf9a190ff24d4a0eef2b884bea"
)
"""Distroless Python 3.13 (Debian 13), non-root, multi-arch index digest; the guard needs only the standard
library and `python3` on PATH. UNVERIFIED: taken from a pull recorded in raiyan10/maops-docker-platform
`docs/build-security.md` @ f7c7e20348c71480328d22ee8919b42747534e3b (August 2026), never resolved from here
(no registry is reachable). How to verify it before the first `pulumi up`: docs/gpu-pools.md, "The guard's
image"."""

DEFAULT_INITIALIZATION_TIMEOUT = "20m"
DEFAULT_MIG_INITIALIZATION_TIMEOUT = "40m"
"""MIG pools' default: their nodes may boot twice (the MIG manager turns MIG mode on with a reboot, since the
AMI's fabric manager and persistence daemon hold the GPUs). On MIG pools the timeout counts from the MIG
manager's last progress (`pending`, `rebooting`), so it bounds one stage of the double boot, not all of it.
Not measured here: an estimate."""
MIN_INITIALIZATION_TIMEOUT_SECONDS = REGISTRATION_TIMEOUT_SECONDS
"""Karpenter deletes a NodeClaim whose Node has not registered 15 minutes after launch; a shorter guard
timeout would pre-empt it, and delete GPU nodes that are still booting, pulling images and registering their
GPUs."""
DEFAULT_MAX_DELETIONS_PER_HOUR = 3
DEFAULT_MAX_CONSECUTIVE_DELETIONS = 2
"""Two: one failed launch may be bad luck (a host, a capacity pool); a second in a row, with no node of the
pool initializing in between, is a failure that repeats on every launch."""
MAX_CONSECUTIVE_DELETIONS = 10
"""Beyond ten in a row the latch would add nothing to the hourly limit but a bill of ten wasted boots."""


def check_initialization_timeout(value: str) -> str:
    """`Never`, or a duration of at least `MIN_INITIALIZATION_TIMEOUT_SECONDS`."""
    if value != "Never" and duration_seconds(value) < MIN_INITIALIZATION_TIMEOUT_SECONDS:
        raise ValueError(
            f"must be at least {MIN_INITIALIZATION_TIMEOUT_SECONDS // 60}m, Karpenter's own registration "
            "timeout (a shorter one pre-empts Karpenter and deletes GPU nodes still booting, pulling images "
            "and registering their GPUs), or Never to turn the deletion off"
        )
    return value


class GpuNodeGuardConfig(ConfigModel):
    """`gpu-eks:gpuNodeGuard`: a small controller on the system nodes, installed with any GPU pool."""

    initialization_timeout: DurationOrNever = DEFAULT_INITIALIZATION_TIMEOUT
    """How long a launched GPU NodeClaim may stay uninitialized (not Ready, a startup taint left, or a
    resource its pods requested, such as `nvidia.com/gpu`, not yet allocatable) before the guard deletes it,
    so Karpenter launches a fresh node instead of billing a stuck one until `expireAfter`. On MIG pools it
    counts from the MIG manager's last progress (`pending`, `rebooting`), at most three timeouts after
    launch. At least 15m (Karpenter's registration timeout), or `Never`. Unset: 20m, and 40m for MIG pools
    (they reboot once more). A pool's `initializationTimeout` overrides it."""
    image: PinnedImage = DEFAULT_IMAGE
    """Container image that runs the guard (any image with Python 3.11+ as `python3`), pinned by digest
    (`name@sha256:<64 hex>`)."""
    namespace: KubernetesName = "gpu-node-guard"
    """Namespace created for the guard (Pod Security `restricted`)."""
    sync_interval_seconds: WholeNumber = Field(default=30, ge=10, le=300)
    """How often the guard lists nodes and NodeClaims (and within seconds of a change to a MIG node)."""
    max_deletions_per_hour: WholeNumber = Field(default=DEFAULT_MAX_DELETIONS_PER_HOUR, ge=1, le=60)
    """The circuit breaker's rate limit: at most this many NodeClaims of one pool deleted in any hour; further
    stuck NodeClaims of the pool wait until the hour's count allows (a Warning event on them and on the
    NodePool, and the `gpu_eks_node_guard_breaker_open` metric). All wait while more of the pool's
    NodeClaims are uninitialized than 20 % of them, rounded up to a whole NodeClaim (Karpenter's node-repair
    threshold: a pool of up to five may replace its one stuck node, two stuck of five wait)."""
    max_consecutive_deletions: WholeNumber = Field(
        default=DEFAULT_MAX_CONSECUTIVE_DELETIONS, ge=1, le=MAX_CONSECUTIVE_DELETIONS
    )
    """The circuit breaker's latch: after this many deletions in a pool in a row with no NodeClaim of the pool
    initializing since the last of them, the guard deletes none of the pool's stuck NodeClaims until one
    initializes (a person deletes a stuck one after fixing the cause, and its replacement comes up) or a
    person clears the pool's entry in the guard's Lease (docs/gpu-pools.md, "Resetting the breaker"). The
    clock never resets it: a failure that repeats on every launch is not fixed by launching another."""

    @field_validator("initialization_timeout")
    @classmethod
    def _timeout(cls, value: str) -> str:
        return check_initialization_timeout(value)

    def timeout_for(self, pool_timeout: str | None, mig_gated: bool) -> str:
        """The timeout of one pool: its own, else this section's if set, else the default for its kind."""
        if pool_timeout is not None:
            return pool_timeout
        if "initialization_timeout" in self.model_fields_set or not mig_gated:
            return self.initialization_timeout
        return DEFAULT_MIG_INITIALIZATION_TIMEOUT
