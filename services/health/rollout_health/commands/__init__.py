"""The commands of `python -m rollout_health`, one module each, named for the command; `lifecycle`
holds what they all do around their work."""
