"""How Karpenter's controllers retry a failing reconcile (pure data).

Source: sigs.k8s.io/controller-runtime v0.23.1, `pkg/controller/controller.go`: a controller built without
`Options.RateLimiter` (Karpenter's interruption controller sets none) uses
`workqueue.DefaultTypedControllerRateLimiter`, which is, in k8s.io/client-go
`util/workqueue/default_rate_limiters.go`, the larger of `NewTypedItemExponentialFailureRateLimiter(5ms,
1000s)` and an overall token bucket (10 per second, burst 100) that one failing item never empties. A
reconcile that keeps failing is retried after 5 ms, 10 ms, 20 ms, ... doubling up to the cap: its errors come
more than 5 minutes apart after about 5.5 minutes, and once every 1000 s after about 22 minutes.
"""

from typing import Final

RETRY_BASE_SECONDS: Final = 0.005
"""The delay before the first retry of a failed reconcile (the exponential limiter's base, 5 ms)."""
RETRY_CAP_SECONDS: Final = 1000
"""The longest delay between retries of a reconcile that keeps failing (the exponential limiter's cap)."""
