"""The papers' queueing models of pyorb's dispatch strategies.

Pure arithmetic: nothing of pyorb, no I/O.  :mod:`pyorb.model.mva` solves
closed queueing networks by Mean Value Analysis; :mod:`pyorb.model.strategies`
models each strategy as such a network; :func:`recommend` compares them for
one workload; :mod:`pyorb.model.host` adds the CPU a co-located load generator
(and sink) takes from the same cores::

    from pyorb.model import Workload, recommend
    rec = recommend(Workload(clients=64, cpu=0.0002, delay=0.02))
    rec.strategy, rec.reason     # 'thread_pool(...)', '...'

The adaptive strategy (``pyorb.server.strategies.adaptive``) calls
:func:`recommend` at run time; ``pyorb plan`` prints its tables.
"""

from __future__ import annotations

from pyorb.model.host import Host
from pyorb.model.mva import Point, Station, StationResult, repairman, solve
from pyorb.model.recommend import Recommendation, candidates, recommend
from pyorb.model.strategies import Calibration, Cost, Prediction, Workload, parse_spec, predict

__all__ = [
    "Calibration", "Cost", "Host", "Point", "Prediction", "Recommendation", "Station", "StationResult", "Workload",
    "candidates", "parse_spec", "predict", "recommend", "repairman", "solve",
]
