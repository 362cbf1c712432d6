"""Load-test sweeps of the papers' experiments (``pyorb loadtest ...``).

The driver (:mod:`pyorb.loadtest.sweep`) starts the sink and the middle tier
of each model for each point in fresh processes, drives them with Locust
(headless, in a subprocess: Locust monkey-patches with gevent on import) or
with pyorb's own asyncio closed-loop generator (:mod:`pyorb.loadtest.generator`)
where Locust cannot make enough load on a small machine, meters every
process with psutil, and writes a CSV and PNG figures per experiment.
"""
