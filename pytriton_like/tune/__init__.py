"""``pytriton_like tune``: find the batching, instances and worker processes that serve a callable fastest.

The modules, each one concept: :mod:`.settings` (what is tuned, as one value), :mod:`.space` (the
values tried), :mod:`.search` (quick hill climbing or the whole grid), :mod:`.trial_server` and
:mod:`.trial` (a setting served and driven), :mod:`.load` (the load generator), :mod:`.samples`
(the requests and the callable's own answers), :mod:`.usage` (CPU and memory of the serving
processes), :mod:`.choice` (the goal, scores, the recommendation), :mod:`.progress`,
:mod:`.report` and :mod:`.page` (report.json, the terminal, report.html), :mod:`.run` and
:mod:`.command` (the command). See docs/tuning.md.
"""

__all__: list = []
