"""How long `pulumi up` waits for a deleted NodePool: its terminationGracePeriod (the longest drain of its
nodes) plus pulumi-kubernetes' own default wait (10 minutes: provider/pkg/await/await.go `Deletion`)."""

from synth.runner import ProgramRun
from tests.helpers import run

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def test_the_training_pool_waits_a_day_and_ten_minutes(prod: ProgramRun) -> None:
    training = prod.one(NODE_POOL, "node-pools-gpu-training")
    assert training.inputs["spec"]["template"]["spec"]["terminationGracePeriod"] == "24h"
    assert training.custom_timeouts == {"delete": f"{24 * 60 * 60 + 10 * 60}s"}


def test_a_pool_without_a_grace_period_keeps_the_providers_default() -> None:
    result = run(nodePools=[{"name": "serve", "instanceFamilies": ["g6"], "limits": {"nvidia.com/gpu": "4"}}])
    serve = result.one(NODE_POOL, "node-pools-serve")
    assert "terminationGracePeriod" not in serve.inputs["spec"]["template"]["spec"]
    assert serve.custom_timeouts == {}


def test_prods_inference_pool_waits_an_hour_and_ten_minutes(prod: ProgramRun) -> None:
    inference = prod.one(NODE_POOL, "node-pools-gpu-inference")
    assert inference.inputs["spec"]["template"]["spec"]["terminationGracePeriod"] == "1h"
    assert inference.custom_timeouts == {"delete": f"{60 * 60 + 10 * 60}s"}
