"""The planner process: translates between Kafka and the pure engine's `decide`, durably.

No rollout logic lives here. Each poll batch becomes one `EventBatch`; the engine's answer is
journalled in the store together with the consumed offsets and the encoded messages to publish
(the outbox), in one atomic write, before anything is published or committed (BUS-3, BUS-6).
`planner` holds the terms and the poll loop; the modules it calls are named for their part.
"""

from rollout_planner.service.planner import Planner
from rollout_planner.service.settings import PlannerSettings

__all__ = ["Planner", "PlannerSettings"]
