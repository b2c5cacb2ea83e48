"""What a pool becomes (pure; no Pulumi): the layer between `facts/` and both `config/` and `components/`.

- `pools.sharing`: what a GPU-sharing pool's nodes advertise (time-slices, MIG devices) and the units its
  GPU cap counts in.
- `pools.capacity`: what each node a pool may launch counts against the pool's limits, as Karpenter counts
  it, and the smallest such node per limited resource.
- `pools.spend`: the worst case (the most expensive set of nodes the limits admit) and the cheapest fill of
  the GPU limit, solved exactly (the standard library only, for the policy pack too).
- `pools.cost`: a configured pool's and stack's spend at list price (`synth cost`, the spend cap).

Config checks, the components, `synth cost`/`plan`, the alerts and the policy pack all read a pool through
these functions, so they agree on what a pool may hold.
"""
