"""Servers the probes talk to. Each runs as its own agent process inside a pod (netns or container)."""
