"""The papers' experiments to run by hand against a service: the locustfiles in
``loadtests/locustfiles/`` (``locust -f``) and ``python -m loadtests.multihost``."""
