"""The inventory from a management cluster: Cluster API (or Fleet) cluster objects, watched and
published as inventory changes (SEQ-6)."""
