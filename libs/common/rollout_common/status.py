"""The status vocabulary of both reference systems (STAT-1, STAT-2, STAT-4), as string enums."""

from __future__ import annotations

from enum import Enum


class Track(str, Enum):
    CONTROL_PLANE = "controlPlane"
    NODES = "nodes"


TRACKS = (Track.CONTROL_PLANE, Track.NODES)


class ClusterStatus(str, Enum):
    PENDING = "PENDING"
    OUT_OF_SYNC = "OUT_OF_SYNC"
    PAUSED = "PAUSED"
    IN_PROGRESS = "IN_PROGRESS"
    NOT_READY = "NOT_READY"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"
    INELIGIBLE = "INELIGIBLE"
    SKIPPED_NEWER = "SKIPPED_NEWER"


class PauseType(str, Enum):
    MAINTENANCE_POLICY = "MAINTENANCE_POLICY"
    DEPRECATED_API = "DEPRECATED_API"
    USER = "USER"


class IneligibleType(str, Enum):
    INCOMPATIBLE_VERSION = "INCOMPATIBLE_VERSION"
    OTHER_CHANNEL = "OTHER_CHANNEL"
    NO_PARTITION = "NO_PARTITION"


class NotReadyType(str, Enum):
    """Why an upgraded cluster is NOT_READY beyond not having reported ready yet."""

    VERSION_MISMATCH = "VERSION_MISMATCH"


class StageState(str, Enum):
    PENDING = "PENDING"
    IN_PROGRESS = "IN_PROGRESS"
    SOAKING = "SOAKING"
    FORCED_SOAKING = "FORCED_SOAKING"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    COMPLETE = "COMPLETE"
    PAUSED = "PAUSED"
    STUCK = "STUCK"
    CANCELLED = "CANCELLED"


class StageReason(str, Enum):
    USER = "USER"
    FAILURE_BUDGET = "FAILURE_BUDGET"
    INCOMPATIBLE_VERSION = "INCOMPATIBLE_VERSION"
    EMPTY_FIRST_STAGE = "EMPTY_FIRST_STAGE"
    SUPERSEDED = "SUPERSEDED"
    ALL_UPGRADED = "ALL_UPGRADED"
    MAX_UPGRADE_TIME = "MAX_UPGRADE_TIME"
    SOAK_ELAPSED = "SOAK_ELAPSED"
    EMPTY_STAGE_PASS_THROUGH = "EMPTY_STAGE_PASS_THROUGH"
    VERSION_ARRIVED = "VERSION_ARRIVED"
    RESUMED = "RESUMED"
    APPROVAL_BEFORE = "APPROVAL_BEFORE"  # CHK-1: waiting for the approval to start the stage
    APPROVAL_AFTER = "APPROVAL_AFTER"  # CHK-1: soaked, waiting for the approval to qualify downstream
    APPROVED = "APPROVED"
    START_WINDOW = "START_WINDOW"  # CHK-3: PENDING until the stage's start window opens
    CHECK_FAILED = "CHECK_FAILED"  # CHK-2: failed results in a row beyond failureLimit halted the stage
    CHECK_INCONCLUSIVE = "CHECK_INCONCLUSIVE"  # CHK-2: inconclusive results beyond inconclusiveLimit
    CHECK_HOLDS_SOAK = "CHECK_HOLDS_SOAK"  # CHK-2: soak time elapsed, a soak check has not passed fresh


class RolloutState(str, Enum):
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"
    COMPLETED = "COMPLETED"


class WaitRule(str, Enum):
    """Why the planner holds back (STAT-5); the names point at the spec's rules."""

    GATE_1_MAX_UNAVAILABLE = "GATE-1"
    GATE_3_MAX_UNAVAILABLE_PARTITIONS = "GATE-3"
    GATE_6_MAX_CONCURRENT = "GATE-6"
    WIN_MAINTENANCE = "WIN"
    VER_8_DEPRECATED_API = "VER-8"
    SOAK_1_CONTROL_PLANE_FIRST = "SOAK-1"
    SOAK_2_SOAKING = "SOAK-2"
    SOAK_2_PARTITIONS_NOT_READY = "SOAK-2-READY"
    OPS_1_PAUSED = "OPS-1"
    FAILED_UPGRADES = "FAILED"
    VER_5_STUCK = "VER-5"
    SOAK_5_EMPTY_FIRST_STAGE = "SOAK-5"
    CHK_1_APPROVAL = "CHK-1"
    CHK_3_START_WINDOW = "CHK-3"
    CHK_2_CHECK = "CHK-2"
