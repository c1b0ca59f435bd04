"""A lent GPU's logistics: the queue of runs it owes (``gpu.queue``, ``gpu/queue.yaml``), what this
machine prepares for a call's carry (``gpu.prep``), the wave trained there within the call's limit and
packed run by run (``gpu.wave``, ``gpu/wave.sh``), the packs brought home (``gpu.unpack``), the first
check of a card (``gpu.check``, ``gpu/session.sh``) and the tracked tree's size that a call carries
(``gpu.tree_size``). ``python -m nmt gpu ACTION`` is the way in (docs/studies.md, "A wave on a lent GPU")."""
