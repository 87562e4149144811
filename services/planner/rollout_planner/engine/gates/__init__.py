"""A stage's gates beyond readiness (SPEC section 11, CHK), each hooked into the flow at one step."""
