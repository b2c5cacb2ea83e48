"""NVIDIA XID codes that leave a GPU unusable until it is reset or its host rebooted (pure; no Pulumi).

Source: NVIDIA's Xid Catalog for Ampere and newer GPUs, "Resolution Bucket (Immediate Action)"
(docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), and the Xid reference it extends
(docs.nvidia.com/deploy/xid-errors/index.html: 48 and 74 "require a GPU reset or node reboot"; 63 and 64 are
the row-remapping / page-retirement records of an uncorrectable error, which take effect only after a reset;
docs.nvidia.com/deploy/dynamic-page-retirement). On an EKS node nobody resets a GPU by hand: the node is
drained and replaced (its NodeClaim deleted), so every code here is "replace the node".

Every other code (e.g. 13 graphics engine exception, 31 MMU fault, 43 GPU stopped processing for an
application, 45 preemptive cleanup after a process ended, whose immediate action is RESTART_APP) is an
application fault: the GPU stays healthy and the job is restarted.
"""

from typing import Final

FATAL_XIDS: Final[dict[int, str]] = {
    48: "double-bit ECC error (uncorrectable memory error): reset the GPU",
    63: "row remapping / page retirement recorded: takes effect only after a GPU reset",
    64: "row remapping / page retirement failed: the memory is unreliable",
    74: "NVLink error: reset the GPU or reboot the node",
    79: "GPU has fallen off the bus: reboot (replace) the node",
    94: "contained ECC error: the application died and the remapped row waits for a GPU reset",
    95: "uncontained ECC error: reset the GPU",
    119: "GSP RPC timeout: reset the GPU",
    120: "GSP error: reset the GPU",
}
"""XID -> why the GPU needs a reset or its node a reboot (NVIDIA Xid Catalog immediate action RESET_GPU or
RESTART_BM, or memory whose repair needs a reset; 94 is listed with RESTART_APP but leaves a remap that waits
for one)."""

APPLICATION_XIDS: Final[frozenset[int]] = frozenset({13, 31, 43, 45})
"""Examples of application XIDs (immediate action RESTART_APP): the alerts treat every code outside
`FATAL_XIDS` this way; these are the ones the tests and documentation name."""
