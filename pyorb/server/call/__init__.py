"""The call and its reply: what a strategy consumes, below both the adapter and the strategies.

``dispatch`` (a decoded request as a :class:`~pyorb.server.call.dispatch.Call`
and the ways to run it), ``reply`` (where its reply goes), ``stats`` (what
its operation and strategy record) and ``servant`` (what a servant offers).
"""
