"""The locustfiles ``pyorb loadtest`` runs, shipped in the package.

Locust imports them by path (``locust -f``), in its own process: nothing in
pyorb imports them, since Locust patches the process with gevent.
:mod:`sink_experiment` is the closed-loop ``Bench::Sink`` user they and the
repository's own locustfiles (loadtests/locustfiles/) share.
"""
