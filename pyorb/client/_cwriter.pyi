# The compiled twin of pyorb.client.calls.RequestWriter (_cwriter.pyx): the same constructor, methods and fields.
from pyorb.client.calls import RequestWriter as _Original

class RequestWriter(_Original): ...
