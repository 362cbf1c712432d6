"""The security harness: hostile values and flow attacks (imported by the tests),
the server they attack, and the drivers that measure an attack by hand
(``python -m tests.attacks.attack_flow``, ``python -m tests.attacks.attack_values``)."""
