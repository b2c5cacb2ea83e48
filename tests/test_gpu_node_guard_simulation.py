"""The GPU node guard's real code over scripted timelines (tests/support/guard_simulation.py): Karpenter down,
a slow MIG double boot, a MIG failure that repeats on every node, the guard's restart, a second replica and a
network partition, the circuit breaker's latch and its reset, and what Karpenter sees of a MIG node's GPUs
while it is partitioned.

Every scenario also checks the property that makes two replicas safe: every write a replica made was made
while the cluster's Lease named it the holder."""

import json
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from components.gpu_node_guard import guard
from tests.support.guard_simulation import (
    GATE,
    PLUGIN,
    STATE,
    MigNode,
    NodeScript,
    World,
    guard_config,
    karpenter_visible_gpus,
)

MINUTE = 60
HOUR = 3600


def two_replicas(world: World) -> World:
    world.replica("guard-a")
    world.replica("guard-b")
    return world


def only_the_holder_wrote(world: World) -> None:
    writes = [
        r
        for r in world.cluster.requests
        if r.actor.startswith("guard") and r.method in ("PATCH", "DELETE", "POST", "PUT") and r.status < 300
    ]
    assert writes, "the scenario made the guard act"
    assert [r for r in writes if r.holder != r.actor] == []
    # And no NodeClaim was deleted twice.
    deleted = [r.path for r in world.cluster.deletions()]
    assert len(deleted) == len(set(deleted)), deleted


def sample(world: World, into: list[float], read: Callable[[guard.Metrics], float]) -> None:
    """Once a minute, a metric of the leading replica."""
    metrics = world.leader_metrics()
    if metrics is not None and world.clock.seconds % MINUTE == 0:
        into.append(read(metrics))


def windows(times: list[float], width: float) -> Iterator[int]:
    """How many of `times` fall in each window of `width` ending at one of them."""
    for end in times:
        yield sum(1 for t in times if end - width < t <= end)


# --- Karpenter down or lagging ------------------------------------------------------------------------------


def test_karpenter_down_for_30_minutes_deletes_no_healthy_node() -> None:
    """Karpenter crashes a minute after launching two GPU nodes and is back 30 minutes later. Both nodes pass
    the pool's 20-minute timeout while it is down, one healthy (its GPUs up at 7 minutes), one stuck (no GPU
    ever). Nothing is deleted while Karpenter does not lead nor in the 5 minutes after it is back; then only
    the stuck one, whose Node still shows no GPU."""
    world = two_replicas(World())
    world.karpenter.scripts = {"gpu": lambda n: NodeScript(gpus=None if n == 2 else 7 * MINUTE)}
    world.karpenter.demand = {"gpu": 2}
    world.at(MINUTE, lambda w: w.karpenter.stop())
    back = 31 * MINUTE
    world.at(back, lambda w: w.karpenter.start(w.clock.seconds))
    unavailable: list[float] = []
    world.hooks.append(lambda w: sample(w, unavailable, lambda m: m.karpenter_unavailable))
    world.run(45 * MINUTE)

    ((when, claim),) = [(r.at, r.path.rsplit("/", 1)[1]) for r in world.cluster.deletions()]
    assert claim == "gpu-002"
    assert when >= back + world.config.karpenter_settle_seconds
    assert "gpu-001" not in world.karpenter.terminated
    assert guard.condition(world.cluster.nodeclaims["gpu-001"], "Initialized")["status"] == "True"
    (event,) = world.cluster.reasons("InitializationTimeout")
    assert "its Node has no allocatable nvidia.com/gpu" in event["message"]
    assert 1 in unavailable[21:31]  # reported while the watchdog waited (minutes 21-30)
    only_the_holder_wrote(world)


def test_a_lagging_karpenter_never_costs_a_healthy_node() -> None:
    """Karpenter runs but does not mark the NodeClaim Initialized for an hour: its Node is Ready, without a
    startup taint, with its GPUs; the guard spares it and says so once."""
    world = two_replicas(World())
    world.karpenter.initializes = False
    world.karpenter.scripts = {"gpu": lambda n: NodeScript()}
    world.karpenter.demand = {"gpu": 1}
    world.run(HOUR)
    assert world.cluster.deletions() == []
    (event,) = world.cluster.reasons("InitializationLagging")
    assert event["involvedObject"]["name"] == "gpu-001"


# --- MIG -----------------------------------------------------------------------------------------------


SLOW_DOUBLE_BOOT = NodeScript(
    register=5 * MINUTE,
    ready=6 * MINUTE,
    gpus=0,
    mig=True,
    # The MIG manager starts at 15 minutes, reboots for 33 minutes, is back at 50 and done at 55: 55 minutes
    # in all, against the pool's 40.
    mig_states=(
        (15 * MINUTE, "pending"),
        (16 * MINUTE, "rebooting"),
        (50 * MINUTE, "pending"),
        (55 * MINUTE, "success"),
    ),
    not_ready=((16 * MINUTE + 10, 49 * MINUTE),),
)


def test_a_slow_mig_double_boot_that_makes_progress_is_not_deleted() -> None:
    world = two_replicas(World())
    world.karpenter.scripts = {"mig": lambda n: SLOW_DOUBLE_BOOT}
    world.karpenter.demand = {"mig": 1}
    seen: list[tuple[str, str]] = []
    world.hooks.append(
        lambda w: (
            seen.append(
                (
                    (w.cluster.nodes["mig-001"]["metadata"]["labels"].get(STATE, "")),
                    w.cluster.nodes["mig-001"]["metadata"]["labels"].get(PLUGIN, ""),
                )
            )
            if "mig-001" in w.cluster.nodes
            else None
        )
    )
    # The guard restarts in the middle (both replicas), losing everything in memory.
    world.at(40 * MINUTE, lambda w: w.each_replica("kill"))
    world.at(42 * MINUTE, lambda w: w.each_replica("start"))
    world.run(70 * MINUTE)

    assert world.cluster.deletions() == []
    node = world.cluster.nodes["mig-001"]
    assert GATE not in node["spec"]["taints"]
    assert guard.condition(world.cluster.nodeclaims["mig-001"], "Initialized")["status"] == "True"
    assert world.cluster.reasons("MigGateLifted")
    # The device plugin never ran before the MIG manager's success.
    assert {plugin for state, plugin in seen if state != "success"} == {guard.DEVICE_PLUGIN_PAUSED}
    progress = guard.MigProgress.parse(node)
    assert progress is not None
    assert progress.state == "success"
    only_the_holder_wrote(world)


def test_a_mig_node_whose_manager_stops_making_progress_is_deleted() -> None:
    """The same node, but the MIG manager never comes back from the reboot: deleted 40 minutes after its
    last progress (`rebooting`), not 40 after launch."""
    stalled = replace(
        SLOW_DOUBLE_BOOT,
        mig_states=SLOW_DOUBLE_BOOT.mig_states[:2],
        not_ready=((16 * MINUTE + 10, 10 * HOUR),),
    )
    world = two_replicas(World())
    world.karpenter.scripts = {"mig": lambda n: stalled if n == 1 else SLOW_DOUBLE_BOOT}
    world.karpenter.demand = {"mig": 1}
    world.run(70 * MINUTE)
    ((when, claim),) = [(r.at, r.path.rsplit("/", 1)[1]) for r in world.cluster.deletions()]
    assert claim == "mig-001"
    assert 56 * MINUTE <= when <= 57 * MINUTE
    (event,) = world.cluster.reasons("InitializationTimeout")
    assert "counted since the MIG manager last reported progress (rebooting)" in event["message"]
    assert "not Ready" in event["message"]
    only_the_holder_wrote(world)


FAILS_EVERY_TIME = NodeScript(
    gpus=0, mig=True, mig_states=((10 * MINUTE, "pending"), (11 * MINUTE, "failed"))
)


def test_a_mig_failure_on_every_node_latches_the_breaker_across_a_failover() -> None:
    """Every node the pool launches fails the same way; each deletion makes Karpenter launch another. With a
    15-minute timeout that would be a boot every 25 minutes, forever: the breaker deletes two in a row (the
    default `maxConsecutiveDeletions`), then holds the third for a person and says so on the NodePool, and
    stays latched across a failover of the guard's leader and after the hour of those deletions passed."""
    pools = {"mig": guard.PoolPolicy(initialization_timeout_seconds=15 * MINUTE, mig_gate=True)}
    world = two_replicas(World(config=guard_config(pools=pools)))
    world.karpenter.scripts = {"mig": lambda n: FAILS_EVERY_TIME}
    world.karpenter.demand = {"mig": 1}
    breaker: list[float] = []
    world.hooks.append(lambda w: sample(w, breaker, lambda m: m.breaker_open.get("mig", 0)))
    # The leader fails over in the middle: the streak is in the Lease, not in its memory.
    world.at(90 * MINUTE, lambda w: next(r for r in w.replicas if r.name == w.leader()).kill())
    world.run(3 * HOUR)

    assert [r.path.rsplit("/", 1)[1] for r in world.cluster.deletions()] == ["mig-001", "mig-002"]
    # Recorded once by each leader (the new one does not know what the old one recorded).
    held = world.cluster.reasons("DeletionHeld")
    assert {e["involvedObject"]["name"] for e in held} == {"mig-003"}
    assert "instance type g6e.12xlarge" in held[0]["message"]
    assert "2 of its NodeClaims in a row" in held[0]["message"]
    assert "kubectl delete nodeclaim mig-003" in held[0]["message"]
    pool_event = world.cluster.reasons("GuardBreakerOpen")[0]
    assert pool_event["involvedObject"] == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "name": "mig",
        "uid": "np-mig",
    }
    assert "Held: mig-003 (g6e.12xlarge)" in pool_event["message"]
    assert breaker[-60:] == [1] * 60
    # The node waiting for a person keeps its gate and its device plugin off.
    (waiting,) = world.cluster.nodes.values()
    assert GATE in waiting["spec"]["taints"]
    assert waiting["metadata"]["labels"][PLUGIN] == guard.DEVICE_PLUGIN_PAUSED
    only_the_holder_wrote(world)


def stored_history(world: World, pool: str) -> guard.PoolHistory:
    """The pool's breaker history as the guard's Lease holds it (none once nothing is left to remember)."""
    lease = world.cluster.leases[world.config.leader_lease.path]
    return guard.parse_deletions(guard.annotations_of(lease)).get(pool, guard.PoolHistory())


def test_a_pool_whose_every_node_fails_is_deleted_twice_then_held_for_hours() -> None:
    """Demand 1, no node ever gets its GPUs. Before the latch this made 35 deletions in 12 hours (three an
    hour, the hourly limit, forever; 14 in the 5 hours run here). Now: two, then the third NodeClaim is held
    until the end, through a leader change and a restart of the whole Deployment, and the holding alert's
    series stays up."""
    world = two_replicas(World())
    world.karpenter.scripts = {"gpu": lambda n: NodeScript(gpus=None)}
    world.karpenter.demand = {"gpu": 1}
    held: list[float] = []
    world.hooks.append(lambda w: sample(w, held, lambda m: m.held.get("gpu", 0)))
    world.at(2 * HOUR, lambda w: next(r for r in w.replicas if r.name == w.leader()).kill())
    world.at(3 * HOUR, lambda w: w.each_replica("kill"))
    world.at(3 * HOUR + MINUTE, lambda w: w.each_replica("start"))
    world.run(5 * HOUR)

    deletions = world.cluster.deletions()
    assert [r.path.rsplit("/", 1)[1] for r in deletions] == ["gpu-001", "gpu-002"]
    assert world.karpenter.launched == 3
    assert "gpu-003" in world.cluster.nodeclaims
    # Held (gpu_eks_node_guard_nodeclaims_held = 1, what GpuNodeGuardHoldingNodeClaims fires on) from the
    # first sync after gpu-003's deadline to the end, bar the minute the Deployment was down.
    latched_at = int((deletions[-1].at + 25 * MINUTE) // MINUTE) + 1
    assert set(held[latched_at:]) == {1}
    assert stored_history(world, "gpu").streak == 2
    only_the_holder_wrote(world)


def test_one_failing_slot_among_healthy_nodes_is_bounded() -> None:
    """Four healthy nodes and a fifth slot whose every node fails (before the latch: 23 deletions in 8
    hours; after it nothing more happens, so two hours show it: the third is held from about 63 minutes).
    The healthy nodes initialized before the streak began, so they do not end it."""
    world = two_replicas(World())
    world.karpenter.scripts = {"gpu": lambda n: NodeScript(gpus=None if n > 4 else 7 * MINUTE)}
    world.karpenter.demand = {"gpu": 5}
    world.run(2 * HOUR)
    assert [r.path.rsplit("/", 1)[1] for r in world.cluster.deletions()] == ["gpu-005", "gpu-006"]
    assert world.karpenter.launched == 7
    assert {e["involvedObject"]["name"] for e in world.cluster.reasons("DeletionHeld")} == {"gpu-007"}
    assert world.karpenter.terminated == ["gpu-005", "gpu-006"]
    only_the_holder_wrote(world)


def test_a_transient_failure_resets_the_streak_so_a_later_one_is_replaced_again() -> None:
    """With a latch after a single deletion: the first node fails and is replaced, the replacement comes up
    and ends the streak (in the Lease); three hours later an unrelated node fails and is replaced too, and
    its replacement ends that streak as well. Without the reset the second would have been held."""
    world = two_replicas(World(config=guard_config(max_consecutive_deletions=1)))
    world.karpenter.scripts = {"gpu": lambda n: NodeScript(gpus=None if n in (1, 3) else 7 * MINUTE)}
    world.karpenter.demand = {"gpu": 1}
    world.run(HOUR)
    assert stored_history(world, "gpu").streak == 0
    world.karpenter.demand = {"gpu": 2}
    world.run(3 * HOUR)
    assert [r.path.rsplit("/", 1)[1] for r in world.cluster.deletions()] == ["gpu-001", "gpu-003"]
    assert world.cluster.reasons("DeletionHeld") == []
    assert stored_history(world, "gpu").streak == 0
    claims = world.cluster.nodeclaims.values()
    assert {guard.condition(c, "Initialized")["status"] for c in claims} == {"True"}
    only_the_holder_wrote(world)


def test_a_person_resets_a_latched_breaker_either_way() -> None:
    """Latched on a pool whose nodes all fail. A person fixes the cause and deletes the held NodeClaim: its
    replacement initializes, which resets the breaker. Later the nodes fail again and the breaker latches
    again; this time the person clears the pool's entry in the Lease (docs/gpu-pools.md's command), and the
    guard deletes the held NodeClaim at its next sync."""
    broken = {"now": True}
    world = two_replicas(World())
    world.karpenter.scripts = {"gpu": lambda n: NodeScript(gpus=None if broken["now"] else 7 * MINUTE)}
    world.karpenter.demand = {"gpu": 1}
    world.run(2 * HOUR)
    assert len(world.cluster.deletions()) == 2
    broken["now"] = False
    world.cluster.nodeclaims["gpu-003"]["metadata"]["deletionTimestamp"] = world.clock.stamp()  # kubectl
    world.run(30 * MINUTE)
    assert "gpu-004" in world.cluster.nodeclaims
    assert stored_history(world, "gpu").streak == 0

    broken["now"] = True
    world.karpenter.demand = {"gpu": 2}
    world.run(2 * HOUR)
    assert len(world.cluster.deletions()) == 4
    (held,) = world.cluster.reasons("DeletionHeld")[1:]
    assert held["involvedObject"]["name"] == "gpu-007"

    def clear(w: World) -> None:  # what `kubectl ... | jq 'del(.gpu)' | kubectl replace -f -` leaves
        lease = w.cluster.leases[w.config.leader_lease.path]
        annotations = lease["metadata"]["annotations"]
        entries = json.loads(annotations[guard.DELETIONS_ANNOTATION])
        del entries["gpu"]
        annotations[guard.DELETIONS_ANNOTATION] = json.dumps(entries)
        w.cluster.bump(lease)

    world.at(world.clock.seconds, clear)
    world.run(MINUTE)
    assert world.cluster.deletions()[-1].path.endswith("/gpu-007")
    only_the_holder_wrote(world)


def test_many_nodes_failing_alike_are_all_left_for_a_person() -> None:
    """A burst of four MIG nodes, all failing: more than 20 % of the pool is uninitialized, so none is
    deleted (another launch would fail alike)."""
    world = two_replicas(World())
    world.karpenter.scripts = {"mig": lambda n: FAILS_EVERY_TIME}
    world.karpenter.demand = {"mig": 4}
    world.run(2 * HOUR)
    assert world.cluster.deletions() == []
    held = {e["involvedObject"]["name"] for e in world.cluster.reasons("DeletionHeld")}
    assert held == {"mig-001", "mig-002", "mig-003", "mig-004"}
    (pool_event,) = world.cluster.reasons("GuardBreakerOpen")
    assert "4 of its 4 NodeClaims are not initialized" in pool_event["message"]
    assert len(world.cluster.reasons("MigConfigFailed")) == 4
    only_the_holder_wrote(world)


# --- the guard's own failures -----------------------------------------------------------------------------


def test_a_leader_that_dies_mid_deletion_is_replaced_without_a_double_action() -> None:
    """The leader writes the deletion into the Lease, then dies before its DELETE reaches the API server.
    The standby takes over once the Lease is 15 s silent, finds the NodeClaim still stuck and deletes it,
    once; the history counts both attempts (erring on the side of fewer deletions). The dead replica comes
    back as the standby."""
    world = World()
    a, b = world.replica("guard-a"), world.replica("guard-b")
    world.karpenter.scripts = {"gpu": lambda n: NodeScript(gpus=None if n == 1 else 7 * MINUTE)}
    world.karpenter.demand = {"gpu": 1}
    world.run(5)
    first = world.leader()
    world.cluster.crash_on[first] = "DELETE /apis/karpenter.sh"
    world.at(25 * MINUTE, lambda w: next(r for r in w.replicas if not r.alive).start())
    world.run(30 * MINUTE)

    dead = next(r for r in (a, b) if r.name == first)
    assert dead.crashes == 1
    ((deleter, claim),) = [(r.actor, r.path.rsplit("/", 1)[1]) for r in world.cluster.deletions()]
    assert claim == "gpu-001"
    assert deleter != first
    history = stored_history(world, "gpu")
    assert len(history.deletions) == 2
    assert history.streak == 0  # the replacement initialized
    assert world.leader() != first  # the restarted one stays standby
    only_the_holder_wrote(world)


def test_a_partitioned_leader_stops_acting_before_the_standby_starts() -> None:
    """The leader loses the API server for a minute: it stops counting itself leader 10 s after its last
    renewal, the standby takes over 15 s after it last saw one, and the old leader, back, stays standby."""
    world = World()
    world.replica("guard-a")
    world.replica("guard-b")
    world.karpenter.scripts = {"mig": lambda n: SLOW_DOUBLE_BOOT}
    world.karpenter.demand = {"mig": 1}
    world.run(14 * MINUTE)
    first = world.leader()
    world.cluster.unreachable.add(first)
    world.run(MINUTE)
    world.cluster.unreachable.clear()
    world.run(50 * MINUTE)
    assert world.leader() != first
    assert world.cluster.deletions() == []
    assert world.cluster.reasons("MigGateLifted")
    only_the_holder_wrote(world)


# --- what Karpenter sees of a MIG node's GPUs -------------------------------------------------------------


def visible_gpus(
    node: MigNode, *, guarded: bool = True, watch: bool = True, seconds: float = 40 * MINUTE
) -> tuple[set[int], World]:
    """Every value of `nvidia.com/gpu` Karpenter counts the MIG node as holding, second by second."""
    world = World(watch=watch)
    if guarded:
        two_replicas(world)
    world.karpenter.scripts = {"mig": lambda n: node}
    world.karpenter.demand = {"mig": 1}
    seen: set[int | None] = set()
    world.hooks.append(lambda w: seen.add(karpenter_visible_gpus(w.cluster, "mig-001", expected=node.slices)))
    world.run(seconds)
    return {n for n in seen if n is not None}, world


SWEPT = (250, 300, 329)
"""Operator reconciles for other nodes' sake before NFD labels this one (at 330): each removes the device
plugin's pause."""


@pytest.mark.parametrize(
    "node",
    [
        MigNode(),  # no reconcile before NFD: the pause set at registration is kept
        MigNode(sweeps=SWEPT),  # swept just before NFD: the operator sets true, the guard pauses it again
        MigNode(sweeps=SWEPT, validation=10),  # a device plugin quicker than anything measured
        MigNode(reboot=None),  # MIG mode applied in place, no reboot
    ],
    ids=["kept", "swept", "swept-fast-plugin", "no-reboot"],
)
def test_karpenter_never_counts_whole_gpus_on_a_mig_node(node: MigNode) -> None:
    seen, world = visible_gpus(node)
    assert seen == {node.slices}
    assert world.cluster.reasons("MigGateLifted")  # it did partition, and its gate was lifted
    assert guard.condition(world.cluster.nodeclaims["mig-001"], "Initialized")["status"] == "True"
    assert world.cluster.deletions() == []


def test_a_failed_mig_node_never_advertises_whole_gpus_either() -> None:
    """The MIG manager fails before MIG mode is on (no reboot needed, the devices not created): it sets the
    device plugin back to true, which would advertise whole GPUs; the guard pauses it again."""
    node = MigNode(sweeps=SWEPT, reboot=None, fails=True)
    world = two_replicas(World())
    world.karpenter.scripts = {"mig": lambda n: node}
    world.karpenter.demand = {"mig": 1}
    seen: set[int | None] = set()
    world.hooks.append(lambda w: seen.add(karpenter_visible_gpus(w.cluster, "mig-001", expected=node.slices)))
    world.run(20 * MINUTE)
    assert seen - {None} == {node.slices}
    assert world.cluster.reasons("MigConfigFailed")


def test_the_checks_above_catch_whole_gpus_when_nothing_pauses_the_plugin() -> None:
    """The controls: without the guard, a swept node advertises its 8 whole GPUs and Karpenter counts 8;
    with a guard that only polls every 30 s (no watch), a device plugin that starts right after a poll gets
    there first."""
    assert 8 in visible_gpus(MigNode(sweeps=SWEPT), guarded=False, seconds=10 * MINUTE)[0]
    after_a_poll = MigNode(sweeps=(331,), nfd=332, validation=10)
    assert 8 in visible_gpus(after_a_poll, watch=False, seconds=10 * MINUTE)[0]
    assert visible_gpus(after_a_poll, seconds=40 * MINUTE)[0] == {56}
