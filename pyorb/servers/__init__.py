"""The papers' servers, runnable with ``python -m pyorb.servers.<name>``.

``sink`` and ``middle`` are pyorb servers in every threading model;
``omni_sink`` and ``omni_middle`` are the same servers on omniORBpy's own
POA, the baselines every benchmark runs beside them.  They live in the
package (the repository's ``servers/`` folder has thin wrappers) so that the
CLI, the pytest plugin and the load-test driver can start them anywhere.
"""
