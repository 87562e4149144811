"""OPS-3 with a version over the bound: an operator command may name any text as its version, so the
engine parses it; a 5,000-digit part raised Python's ValueError (its 4,300-digit conversion limit)
where a VersionError is answered, and the command was set aside (BUS-9) instead of acknowledged."""

from __future__ import annotations

from enginekit import V31, Driver, acks, cluster, names, sequence, stage

REL = {"1.30": V31}


def test_ops_3_a_soak_override_for_a_version_over_the_bound_is_rejected_with_the_reason() -> None:
    d = Driver(sequence(stage("a", soak="1d"), stage("b")), [cluster(n) for n in names("a", 2)])
    d.release(REL, at=1)
    huge = "1.31." + "9" * 5000
    ((cid, ok, why),) = acks(d.command("soak_override", at=2, command_id="c1", stage="a", version=huge, soak=0))
    assert (cid, ok) == ("c1", False)
    assert why.endswith("(5005 characters) is not a version: a part of 5000 digits (at most 12)")
    assert len(why) < 150
