"""netslo's pytest plugin: options and hooks (``hooks``), reports (``report``) and the fixtures of the
gate (``cluster``, ``impair``, ``protocols``, ``qos``). Loaded through the ``pytest11`` entry point."""
