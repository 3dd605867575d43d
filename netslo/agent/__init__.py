"""The program in every pod and on every node, ``python -m netslo.agent`` (``cli``), and the
machinery that runs it warm: ``session`` (requests over one exec stream), ``forkserver``, ``detach``,
``responder_set``; ``image`` builds its container image from ``recipe/``."""
