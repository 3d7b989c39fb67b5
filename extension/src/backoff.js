// Reconnect delays: exponential from `base`, capped at `max`, with ±`jitter` spread so
// several browsers do not retry in lock-step. `attempt` counts failures since the last
// successful hello (1 = first retry).

import { LIMITS } from "./config.js";

export function backoffDelay(attempt, options = {}, random = Math.random) {
  const base = options.base ?? LIMITS.backoffBaseMs;
  const max = options.max ?? LIMITS.backoffMaxMs;
  const jitter = options.jitter ?? LIMITS.backoffJitter;
  const step = Math.max(1, Math.floor(attempt));
  const raw = Math.min(max, base * 2 ** Math.min(step - 1, 30));
  const spread = raw * jitter * (2 * random() - 1);
  return Math.max(0, Math.round(Math.min(max, raw + spread)));
}
