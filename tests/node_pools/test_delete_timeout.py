"""How long `pulumi up` waits for a deleted NodePool: its terminationGracePeriod (the longest drain of its
nodes) plus pulumi-kubernetes' own default wait (10 minutes: provider/pkg/await/await.go `Deletion`)."""

from synth.runner import ProgramRun

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def test_the_training_pool_waits_a_day_and_ten_minutes(prod: ProgramRun) -> None:
    training = prod.one(NODE_POOL, "node-pools-gpu-training")
    assert training.inputs["spec"]["template"]["spec"]["terminationGracePeriod"] == "24h"
    assert training.custom_timeouts == {"delete": f"{24 * 60 * 60 + 10 * 60}s"}


def test_a_pool_without_a_grace_period_keeps_the_providers_default(prod: ProgramRun) -> None:
    inference = prod.one(NODE_POOL, "node-pools-gpu-inference")
    assert "terminationGracePeriod" not in inference.inputs["spec"]["template"]["spec"]
    assert inference.custom_timeouts == {}
